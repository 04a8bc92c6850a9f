"""The DPU fabric's drivers: their contracts (:mod:`.base`) and one folder per driver —
:mod:`.ovn` (the OVN northbound DB), :mod:`.k8s` (Kubernetes Nodes: labels, taints, drain) and
:mod:`.host` (each DPU host's side: its OVSDB, its firmware tools, its datapath over SSH)."""
