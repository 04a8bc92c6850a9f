"""The infiniband kind's own tests."""
