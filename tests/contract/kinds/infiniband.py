"""InfiniBand case: 0-2 HCA ports per node, one PKey per network, observed PKey tables with
any mix of default, tenant and stray PKeys (the SM port always on the fabric); the read-back
has OpenSM's semantics: every port on the fabric gets ``expected_tables(plan.layout)``."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from gpufabric.domain.fabric import FabricPlan, Tenancy
from gpufabric.domain.models import Node, Segment
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.entries import IbPort, all_ib_ports, with_ib
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.fabrics.infiniband.plan import IbPlan, expected_tables
from gpufabric.fabrics.infiniband.segments import pkey_segment, segment_pkey
from gpufabric.fabrics.infiniband.state import IbFabricState, PkeyTable

from contract.kinds import KindCase

SM = Guid(0x0002C90300FF0001)


def node(draw: st.DrawFn, name: str, i: int) -> Mapping[str, Any]:
    n = draw(st.integers(0, 2))
    ports = tuple(IbPort(name, f"mlx5_{k}", 1, Guid(0x100 + 16 * i + k), Guid(0x900 + 16 * i + k)) for k in range(n))
    return {"fabric_ports": with_ib(Node(name), *ports).fabric_ports}


def segment(i: int) -> Segment:
    return pkey_segment("infiniband", 100 + i, 0x0A00 + i)


def observed(draw: st.DrawFn, tenancy: Tenancy) -> IbFabricState:
    pkeys = sorted(segment_pkey(s).value for n in tenancy.networks.values() for s in n.segments if segment_pkey(s) is not None)
    entries = st.sampled_from([0x7FFF, 0xFFFF, 0x0B05, 0x8B05, *pkeys, *(k | 0x8000 for k in pkeys)])
    tables = [PkeyTable(SM, tuple(sorted(set(draw(st.lists(entries, max_size=3))))))]
    for n in tenancy.nodes:
        for p in all_ib_ports(n):
            if draw(st.booleans()) or draw(st.booleans()):
                tables.append(PkeyTable(p.port_guid, tuple(sorted(set(draw(st.lists(entries, max_size=4)))))))
    return IbFabricState(tuple(tables))


def read_back(state: IbFabricState, plan: FabricPlan) -> IbFabricState:
    assert isinstance(plan, IbPlan) and plan.layout is not None
    want = expected_tables(plan.layout, [t.port_guid for t in state.tables])
    return IbFabricState(tuple(dataclasses.replace(t, entries=tuple(sorted(want[t.port_guid]))) for t in state.tables))


CASE = KindCase(InfinibandKind(), observed, read_back, node=node, segment=segment, settings={"sm_port_guids": (SM,)})
