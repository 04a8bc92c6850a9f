"""The move engine and what drives the fabrics: plan -> apply -> verified read-back, reconcile, audit."""
