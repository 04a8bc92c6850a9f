"""The DPU fabric's audit (pure): its invariants (:mod:`.checks`), the offload report
(:mod:`.report`) and the offload-table capacities it compares against (:mod:`.capacity`)."""
