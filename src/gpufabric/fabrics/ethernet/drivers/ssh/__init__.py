"""The SSH driver: a switch driven over SSH in one of the CLI dialects (data: dialects/*.yaml)."""
