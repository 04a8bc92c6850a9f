"""Shared builders for the DPU fabric's unit tests: nodes with DPUs, leases, tenancies."""

from __future__ import annotations

from datetime import UTC, datetime

from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import BUILTIN_OFFERINGS, Lease, Node, Offering
from gpufabric.fabrics.dpu.entries import Dpu, DpuMode, dpu_ports

T0 = datetime(2026, 1, 1, tzinfo=UTC)
OFFERINGS = {o.name: o for o in BUILTIN_OFFERINGS} | {
    "k8s-full": Offering("k8s-full", "plain Kubernetes", (("dpu_role", "full"),))
}


def dpu_node(name: str, **details: str) -> Node:
    d = {"pf": "ens1f0", "mgmt_vf": "ens1f0v0", "representors": "pf0vf1", "nic_model": "BlueField-2"} | details
    return Node(name, fabric_ports=dpu_ports(Dpu(name, "bf0", DpuMode.DPU, tuple(sorted(d.items())))))


def tenancy(nodes: list[Node], owners: dict[str, tuple[str, str] | None]) -> Tenancy:
    """owners: node -> (tenant, offering) or None (quarantine)."""
    leases = {
        n: Lease(o[0], n, T0, offering=o[1]) if o is not None else None for n, o in owners.items()
    }
    return Tenancy(tuple(nodes), leases, {}, OFFERINGS)
