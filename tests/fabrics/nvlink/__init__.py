"""The nvlink kind's own tests."""
