"""Audit: pure isolation invariants over observed fabric state."""
