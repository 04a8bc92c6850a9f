"""Properties of planning (hypothesis), over Ethernet, InfiniBand and the in-memory test fabric.

1. Convergence: for any desired/observed pair, applying the plan to observed with a pure
   simulator of the fabric (Ethernet: each changed port becomes ``after``; InfiniBand, OpenSM's
   semantics: every port on the fabric gets ``expected_tables(plan.layout)``) gives a state
   whose plan is empty.
2. Safe moves (no intermediate state of a move splits a node) moved to the FabricKind
   conformance suite, tests/contract/test_fabric_kind_contract.py, over every registered kind.
"""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufabric.domain.fabric import FabricKind, FabricPlan
from gpufabric.domain.models import QUARANTINE, Lease, Network, Node
from gpufabric.domain.state import FabricState
from gpufabric.domain.values import Guid, PKey, VlanId
from gpufabric.fabrics.ethernet.entries import EthernetPort, ethernet_ports
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.ethernet.plan import EthernetPlan, merge_switches
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState
from gpufabric.fabrics.infiniband.entries import IbPort, all_ib_ports
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.fabrics.infiniband.plan import IbPlan, expected_tables
from gpufabric.fabrics.infiniband.state import IbFabricState, PkeyTable
from gpufabric.planning.desired import DesiredState, derive_desired, tenancy_of
from gpufabric.planning.plan import Plan, plan

from support.memfabric import MemoryKind, MemoryPlan, MemState
from support.ports import port_node
from support.segments import segment

KINDS: list[FabricKind[Any, Any]] = [EthernetKind(), InfinibandKind(), MemoryKind()]
SM = Guid(0x0002C90300FF0001)
Q = 4000
TENANTS = ("ta", "tb", "tc")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SETTINGS = {"quarantine_vlan": Q, "sm_port_guids": (SM,)}
PROPS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def networks() -> tuple[Network, ...]:
    """Two networks per tenant, each with its own VLAN and PKey."""
    out = []
    for i, (t, k) in enumerate(itertools.product(TENANTS, range(2))):
        vlan, pkey = 2000 + i, 0x0A00 + i
        segs = (segment("ethernet", vlan, vlan=VlanId(vlan)), segment("infiniband", 100 + i, pkey=PKey(pkey)))
        out.append(Network(f"{t}-n{k}", t, segs))
    return tuple(out)


NETS = networks()
VLANS = [n.segments[0].seg_id for n in NETS]
PKEYS = [0x0A00 + i for i in range(len(NETS))]


@st.composite
def inventories(draw: st.DrawFn) -> tuple[Node, ...]:
    nodes = []
    for i in range(draw(st.integers(1, 4))):
        name = f"n{i}"
        eth = tuple(EthernetPort(name, f"eth{k}", f"s{k % 2}", f"{name}p{k}") for k in range(draw(st.integers(0, 2))))
        ib = tuple(IbPort(name, f"mlx5_{k}", 1, Guid(0x100 + 16 * i + k), Guid(0x900 + 16 * i + k)) for k in range(draw(st.integers(0, 2))))
        nodes.append(port_node(name, ethernet=eth, ib=ib))
    return tuple(nodes)


@st.composite
def lease_sets(draw: st.DrawFn, nodes: tuple[Node, ...]) -> tuple[Lease, ...]:
    out = []
    for n in nodes:
        tenant = draw(st.sampled_from((None, *TENANTS)))
        if tenant is not None:
            mine = [x.name for x in NETS if x.tenant == tenant]
            nets = draw(st.lists(st.sampled_from(mine), min_size=1, max_size=2, unique=True))
            out.append(Lease(tenant, n.name, T0, networks=tuple(sorted(nets))))
    return tuple(out)


def vlan_ids() -> st.SearchStrategy[VlanId]:
    return st.sampled_from([*VLANS, Q, 1, 3999]).map(VlanId)


@st.composite
def port_configs(draw: st.DrawFn, switch: str, port: str) -> EthernetPortConfig:
    mode = draw(st.sampled_from(PortMode))
    if mode is PortMode.SHUTDOWN:
        return EthernetPortConfig(switch, port, mode)
    if mode is PortMode.ACCESS:
        return EthernetPortConfig(switch, port, mode, draw(vlan_ids()))
    trunks = tuple(sorted(set(draw(st.lists(vlan_ids(), min_size=1, max_size=3))), key=lambda v: v.value))
    return EthernetPortConfig(switch, port, mode, draw(st.none() | vlan_ids()), trunks)


@st.composite
def observed_states(draw: st.DrawFn, nodes: tuple[Node, ...]) -> FabricState:
    ports: dict[str, list[EthernetPortConfig]] = {}
    for n in nodes:
        for p in ethernet_ports(n):
            if draw(st.booleans()) or draw(st.booleans()):  # mostly present
                ports.setdefault(p.switch, []).append(draw(port_configs(p.switch, p.switch_port)))
    switches = tuple(SwitchState(s, tuple(sorted(ps))) for s, ps in sorted(ports.items()))
    entries = st.sampled_from([0x7FFF, 0xFFFF, 0x0B05, 0x8B05, *PKEYS, *(k | 0x8000 for k in PKEYS)])
    tables = [PkeyTable(SM, tuple(sorted(set(draw(st.lists(entries, max_size=3))))))]  # the SM port is always on the fabric
    for n in nodes:
        for p in all_ib_ports(n):
            if draw(st.booleans()) or draw(st.booleans()):
                tables.append(PkeyTable(p.port_guid, tuple(sorted(set(draw(st.lists(entries, max_size=4)))))))
    tags = {
        f"{n.name}/m{i}": draw(st.sampled_from((QUARANTINE, *TENANTS)))
        for n in nodes
        for i in range(2)
        if draw(st.booleans())
    }
    return FabricState(slices={"ethernet": switches, "infiniband": IbFabricState(tuple(tables)), "memory": MemState.of(tags)})


# --------------------------------------------------------------------------- the simulators
def apply_part(state: FabricState, name: str, part: FabricPlan) -> FabricState:
    """``state`` after one fabric applied ``part`` (pure)."""
    if part.empty:
        return state
    if isinstance(part, EthernetPlan):
        changed = tuple(SwitchState(sw, ps) for sw, ps in part.by_switch().items())
        return state.with_slice(name, merge_switches(state.get("ethernet", ()), changed))
    if isinstance(part, IbPlan):
        assert part.layout is not None
        ib = state.get("infiniband")
        want = expected_tables(part.layout, [t.port_guid for t in ib.tables])  # OpenSM: every port on the fabric
        tables = tuple(dataclasses.replace(t, entries=tuple(sorted(want[t.port_guid]))) for t in ib.tables)
        return state.with_slice(name, dataclasses.replace(ib, tables=tables))
    assert isinstance(part, MemoryPlan)
    mem: MemState = state.get(name, MemState())
    return state.with_slice(name, MemState.of({**mem.by_port, **{c.port: c.after for c in part.changes}}))


def apply_plan(state: FabricState, p: Plan, order: tuple[str, ...] | None = None) -> list[FabricState]:
    """Every state seen while the fabrics apply ``p`` one after the other, in ``order``."""
    parts = dict(p.fabrics)
    seen = []
    for name in order or tuple(parts):
        state = apply_part(state, name, parts[name])
        seen.append(state)
    return seen


def desired(nodes: tuple[Node, ...], leases: tuple[Lease, ...]) -> DesiredState:
    return derive_desired(KINDS, tenancy_of(nodes, leases, NETS, settings=SETTINGS))


# --------------------------------------------------------------------------- 1. convergence
@PROPS
@given(data=st.data())
def test_applying_the_plan_to_observed_converges(data: st.DataObject) -> None:
    nodes = data.draw(inventories())
    want = desired(nodes, data.draw(lease_sets(nodes)))
    observed = data.draw(observed_states(nodes))
    p = plan(KINDS, want, observed)
    after = apply_plan(observed, p)[-1]
    rest = plan(KINDS, want, after)
    assert rest.empty, rest.lines()


@PROPS
@given(data=st.data())
def test_removals_then_additions_also_converge(data: st.DataObject) -> None:
    nodes = data.draw(inventories())
    want = desired(nodes, data.draw(lease_sets(nodes)))
    observed = data.draw(observed_states(nodes))
    removals, additions = plan(KINDS, want, observed).split()
    mid = apply_plan(observed, removals)[-1]
    rest = plan(KINDS, want, apply_plan(mid, additions)[-1])
    assert rest.empty, rest.lines()
