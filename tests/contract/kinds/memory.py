"""The in-memory test kind (tests/support/memfabric), as it is: its ports are invented from
node names (``<node>/m<i>``), so nodes need no ports; observed tags are any tenant or
quarantine on any subset of ports; its backend's read-back is the ports the plan set."""

from __future__ import annotations

from hypothesis import strategies as st

from gpufabric.domain.fabric import FabricPlan, Tenancy
from gpufabric.domain.models import QUARANTINE

from contract.kinds import TENANTS, KindCase
from support.memfabric import MemoryKind, MemoryPlan, MemState


def observed(draw: st.DrawFn, tenancy: Tenancy) -> MemState:
    return MemState.of(
        {
            f"{n.name}/m{i}": draw(st.sampled_from((QUARANTINE, *TENANTS)))
            for n in tenancy.nodes
            for i in range(2)
            if draw(st.booleans())
        }
    )


def read_back(state: MemState, plan: FabricPlan) -> MemState:
    assert isinstance(plan, MemoryPlan)
    return MemState.of({c.port: c.after for c in plan.changes})


CASE = KindCase(MemoryKind(), observed, read_back)
