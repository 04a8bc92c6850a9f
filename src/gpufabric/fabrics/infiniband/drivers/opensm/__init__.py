"""The OpenSM driver (:mod:`.driver`): partitions.conf on the SM hosts, infiniband-diags and SMP reads,
rogue-SM containment and watch."""
