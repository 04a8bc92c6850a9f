"""``gpufabric site check`` for the DPU fabric: every DPU's OVSDB, the OVN northbound database
and the Kubernetes API answer with the configured credentials (TLS verified where configured:
a refused certificate is the driver's own error), and every inventory DPU host has an OVSDB
remote in ``fabrics.yaml``."""

from __future__ import annotations

from typing import Any

from gpufabric.domain.site_check import CheckLevel, SiteCheck, SiteContext, device_check, transport_checks
from gpufabric.fabrics.dpu.entries.info import node_dpus


def dpu_site_checks(backend: Any, ctx: SiteContext) -> list[SiteCheck]:
    out = [device_check("DPU-REACH", f"ovs:{h}", d.read, f"OVSDB of DPU host {h} (fabrics.yaml dpu.ovsdb.{h})")
           for h, d in sorted(backend.ovs.items())]  # fmt: skip
    out.append(device_check("DPU-REACH", "ovn_nb", backend.ovn.read, "OVN northbound (fabrics.yaml dpu.ovn_nb)"))
    if backend.k8s is not None:
        out.append(device_check("DPU-REACH", "kubernetes", backend.k8s.read, "Kubernetes API (fabrics.yaml dpu.kubernetes)"))
    out += transport_checks("DPU-TRANSPORT", "fabrics.yaml dpu", backend)
    for n in ctx.nodes:
        if node_dpus(n) and n.name not in backend.ovs:
            out.append(SiteCheck("DPU-INVENTORY", CheckLevel.ERROR, f"inventory node {n.name} has a DPU but no "
                                 f"fabrics.yaml dpu.ovsdb.{n.name} remote", n.name))  # fmt: skip
    return out
