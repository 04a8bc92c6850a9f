"""Shared builders for the DPU fabric's unit tests: nodes with DPUs, leases, tenancies."""

from __future__ import annotations

from datetime import UTC, datetime

from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import BUILTIN_OFFERINGS, Lease, Node, Offering
from gpufabric.domain.slots import VM_HOST, slot_name
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


HOST, OTHER = "gpu-a01", "gpu-a02"
SLOTS_OF = {"a": (1, 2, 3, 4), "b": (5, 6), "c": (7, 8)}
SA, SB, SC = (slot_name(HOST, m) for m in SLOTS_OF.values())


def slot_tenancy(owners: dict[str, str | None] | None = None, host_offering: str = VM_HOST) -> Tenancy:
    """``HOST`` leased to infra in ``host_offering``, its slots leased per ``owners`` (slot's
    tenant -> lease tenant, None: quarantine); ``OTHER`` leased to a in baremetal."""
    owners = {t: t for t in SLOTS_OF} if owners is None else owners
    slots = [Node(slot_name(HOST, m), host=HOST, slot_modules=m) for m in SLOTS_OF.values()]
    leases: dict[str, Lease | None] = {
        HOST: Lease("infra", HOST, T0, offering=host_offering),
        OTHER: Lease("a", OTHER, T0, offering="baremetal"),
    }
    for t, s in zip(SLOTS_OF, slots, strict=True):
        who = owners.get(t)
        leases[s.name] = Lease(who, s.name, T0, offering="baremetal") if who else None
    return Tenancy((dpu_node(HOST), dpu_node(OTHER), *slots), leases, {}, OFFERINGS)
