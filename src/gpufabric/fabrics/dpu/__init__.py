"""The SmartNIC/DPU fabric: OVN-Kubernetes offload roles per offering (node labels, taints,
DPU-side OVS settings), the tenant's OVN logical ports, offload observability and audit.

The kind's skeleton, outer to inner (each imports only what is below it): :mod:`.kind` (the
seam) · :mod:`.views` (``gpufabric offload`` and its API route) and :mod:`.site_check` ·
:mod:`.backend` (the drivers composed: observe, apply with read-back, the move lifecycle, the
offload report read at the site, the DPU facts) · :mod:`.drivers` (their contracts in
:mod:`.drivers.base`; :mod:`.drivers.ovn`, :mod:`.drivers.k8s`, :mod:`.drivers.host`) ·
:mod:`.readers` (pure parsers) and :mod:`.audit` (invariants, offload report) · :mod:`.plan`
(pure: profiles, diff, changes) · :mod:`.state` and :mod:`.entries` (pure values).
"""
