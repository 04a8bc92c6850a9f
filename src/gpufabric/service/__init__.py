"""Service: store, workflows, reconcile loop."""
