"""The Kubernetes API driver: DPU-role labels and the dpu-host taint of Nodes (:mod:`.nodes`),
and cordon/drain/uncordon through the Eviction API (:mod:`.drain`)."""
