"""Planning: pure functions from desired and observed state to immutable plans."""
