"""NVLink case: nodes with no GPUs, all eight of an HGX 8-GPU board, or half of it; leases
ask for a GPU count the node can hold (as ``lease_gpus`` checks at lease creation); observed
Fabric Managers hold any set of disjoint active partitions (or were not read); the read-back
is the changed nodes' FM after (de)activation, and activating a partition whose GPUs are in
an active one fails as FM does ("in use")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.fabric import FabricPlan, Tenancy
from gpufabric.domain.models import Node
from gpufabric.domain.values import ModuleId
from gpufabric.fabrics.nvlink.entries import Gpu, gpu_ports, node_gpus
from gpufabric.fabrics.nvlink.kind import GPUS, NvlinkKind, lease_gpus
from gpufabric.fabrics.nvlink.plan import NvlinkPlan
from gpufabric.fabrics.nvlink.segments import DEFAULT_BOARD, table
from gpufabric.fabrics.nvlink.state import NodeFm, NvlinkState

from contract.kinds import KindCase

HGX = table(DEFAULT_BOARD)
BOARDS = ((), tuple(range(1, 9)), (1, 2, 3, 4), (5, 6, 7, 8))


def node(draw: st.DrawFn, name: str, i: int) -> Mapping[str, Any]:
    modules = draw(st.sampled_from(BOARDS))
    return {"fabric_ports": gpu_ports(*(Gpu(name, ModuleId(m), f"0000:{m:02x}:00.0") for m in modules))}


def lease(draw: st.DrawFn, n: Node) -> Mapping[str, Any]:
    def fits(k: int | None) -> bool:
        try:
            lease_gpus(n, k)
        except ValidationError:
            return False
        return True

    return {"terms": ((GPUS.name, draw(st.sampled_from([k for k in (None, 1, 2, 4, 8) if fits(k)]))),)}


def observed(draw: st.DrawFn, tenancy: Tenancy) -> NvlinkState:
    nodes: dict[str, NodeFm] = {}
    for n in tenancy.nodes:
        if not node_gpus(n) or not draw(st.booleans() | st.just(True)):  # mostly read
            continue
        active: list[int] = []
        busy: set[int] = set()
        for p in draw(st.lists(st.sampled_from(HGX), max_size=3)):
            if not p.gpus & busy:
                active.append(p.id)
                busy |= p.gpus
        nodes[n.name] = NodeFm(n.name, HGX, frozenset(active))
    return NvlinkState(nodes)


def read_back(state: NvlinkState, plan: FabricPlan) -> NvlinkState:
    assert isinstance(plan, NvlinkPlan)
    out: dict[str, NodeFm] = {}
    for c in plan.ordered():
        fm = out.get(c.node) or state.nodes.get(c.node) or NodeFm(c.node, HGX)
        part = fm.partition(c.partition)
        assert part is not None, f"{c.line()}: no such partition on {c.node}"
        if c.activate:
            busy = frozenset().union(*(p.gpus for p in fm.active_partitions()))
            assert not part.gpus & busy, f"{c.line()}: FM refuses, GPUs in use by {sorted(fm.active)}"
            out[c.node] = fm.with_active(fm.active | {c.partition})
        else:
            out[c.node] = fm.with_active(fm.active - {c.partition})
    return NvlinkState(out)


CASE = KindCase(NvlinkKind(), observed, read_back, node=node, lease=lease, records_owner=False)
