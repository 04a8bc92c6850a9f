"""The SmartNIC/DPU fabric: OVN-Kubernetes offload roles per offering (node labels, taints,
DPU-side OVS settings), the tenant's OVN logical ports, offload observability and audit.

Pure parts: :mod:`info` (inventory view), :mod:`model` (state and plan), :mod:`profiles`
(roles and the desired slice), :mod:`diff`, :mod:`offload` (parsers), :mod:`report`,
:mod:`checks` (audit), :mod:`sriov`. I/O: :mod:`ovs`, :mod:`k8s`, :mod:`ovn`, :mod:`backend`.
"""
