"""The dpu kind's own tests."""
