"""The OVN northbound driver: tenants' logical switches and ports (:mod:`.northbound`)."""
