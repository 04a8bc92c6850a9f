"""The ethernet kind's own tests."""
