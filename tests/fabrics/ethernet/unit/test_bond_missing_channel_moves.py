"""A bond member read in a channel the switch does not have is refused per node (issue 21): the
move engine on a SQLite store and an in-memory switch that keeps bond membership. Two bonded
nodes are leased; one member of n2's bond is then read in a port-channel the switch does not
have. The other node's moves still go through, the audit reports the member, and only a move
that gives n2 a tenant is refused, with one line naming n2, the member and the channel."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from gpufabric.domain.errors import ConflictError
from gpufabric.domain.models import QUARANTINE, Inventory
from gpufabric.domain.moves import MoveRequest, MoveStatus
from gpufabric.engine.fabrics import Fabrics
from gpufabric.engine.moves import MoveEngine
from gpufabric.engine.reconcile import Policy, reconcile_once
from gpufabric.fabrics.ethernet.audit.bonds import OUT_ID
from gpufabric.fabrics.ethernet.entries import EthernetPort
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState
from gpufabric.planning.plan import tenants_seen
from gpufabric.store.core import Store
from gpufabric.store.registry import Registry, parse_segments

from support import drivers
from support.memfabric import MemorySwitchDriver
from support.ports import port_node

CFG = parse_segments()
BONDS = {"n1": ("po1", "p1", "p2"), "n2": ("po2", "p3", "p4")}
REFUSAL = (
    "ethernet leaf1/p4: member of n2's bond po2 is read in po7, which leaf1 does not have: n2 is not given its "
    "tenant's VLANs (check the switch's configuration, then put the member back)"
)


class BondingSwitch(MemorySwitchDriver):
    """The in-memory switch, keeping which aggregate each member port was put in (``bond`` of a
    change); a member that is up reads with its aggregate's VLANs, as the CLI dialects read one.
    ``stray`` makes a port read in another channel (a config changed behind our back)."""

    def __init__(self, switch: str, ports: Sequence[str], quarantine_vlan: int = 4000) -> None:
        super().__init__(switch, ports, quarantine_vlan)
        self.members: dict[str, str] = {}
        self.stray: dict[str, str] = {}

    def apply(self, changes: Sequence[EthernetPortConfig]) -> None:
        super().apply(changes)
        self.members.update({c.port: c.bond for c in changes if c.bond})

    def observe(self) -> SwitchState:
        st = super().observe()
        bond = {**self.members, **self.stray}

        def read(p: EthernetPortConfig) -> EthernetPortConfig:
            agg = st.port(bond[p.port]) if p.port in bond else None
            if agg is None or p.mode is PortMode.SHUTDOWN:
                return replace(p, bond=bond.get(p.port, ""))
            return replace(agg, port=p.port, bond=bond[p.port])

        return SwitchState(st.switch, tuple(read(p) for p in st.ports))


def inventory() -> Inventory:
    nodes = []
    for name, (bond, *members) in BONDS.items():
        eth = tuple(
            EthernetPort(name, f"eth{k}", "leaf1", m, bond=bond, bond_mode="lacp") for k, m in enumerate(members)
        )
        nodes.append(port_node(name, ethernet=eth))
    return Inventory(tuple(nodes))


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MoveEngine]:
    reg = Registry.from_entry_points()
    reg.register("mem-bond-switch", BondingSwitch)
    ports = ["p1", "p2", "p3", "p4", "po1", "po2"]
    config = {"ethernet": [{"driver": "mem-bond-switch", "options": {"switch": "leaf1", "ports": ports}}]}
    fabrics = Fabrics.from_config(config, reg)
    store = Store.open(url=f"sqlite:///{tmp_path / 'g.db'}")
    store.upsert_inventory(inventory())
    for t in ("ta", "tb"):
        store.create_tenant(t)
        store.create_network(f"{t}-net", t, CFG, kinds=fabrics.kind_list())
    eng = MoveEngine(store, fabrics, CFG, worker="test:1", heartbeat_every=60)
    for node, tenant in (("n1", "ta"), ("n2", "tb")):
        eng.ledger.request(node, MoveRequest(tenant, networks=(f"{tenant}-net",)))
        batch = eng.run_pending()
        assert batch is not None and [m.status for m in batch.moves] == [MoveStatus.DONE]
    yield eng
    fabrics.close()
    store.close()


def switch(e: MoveEngine) -> BondingSwitch:
    d = drivers.switches(e.fabrics)["leaf1"]
    assert isinstance(d, BondingSwitch)
    return d


def owners(e: MoveEngine) -> dict[str, frozenset[str]]:
    return tenants_seen(e.kinds, e.desired(), e.fabrics.observe())


def request(e: MoveEngine, node: str, tenant: str) -> None:
    e.ledger.request(node, MoveRequest(tenant, networks=(f"{tenant}-net",) if tenant != QUARANTINE else ()))


def test_both_bonds_are_leased_with_their_members_in_their_aggregates(engine: MoveEngine) -> None:
    assert owners(engine) == {"n1": {"ta"}, "n2": {"tb"}}
    assert switch(engine).members == {"p1": "po1", "p2": "po1", "p3": "po2", "p4": "po2"}


def test_the_other_nodes_move_goes_through_while_a_leased_bond_has_a_member_in_a_missing_channel(
    engine: MoveEngine,
) -> None:
    switch(engine).stray["p4"] = "po7"
    engine.forget()
    before = switch(engine).observe().port("p4")
    request(engine, "n1", "tb")
    batch = engine.run_pending()
    assert batch is not None and [(m.node, m.status) for m in batch.moves] == [("n1", MoveStatus.DONE)]
    assert owners(engine) == {"n1": {"tb"}, "n2": {"tb"}}
    after = switch(engine).observe().port("p4")
    assert before is not None and after is not None
    assert (after, after.bond) == (before, "po7")  # left as read: nothing planned from it
    kind = engine.kinds[0]
    desired = engine.desired()
    found = [(v.invariant, v.node, v.port) for v in kind.audit(desired.tenancy, desired.get(kind.instance),
                                                                engine.fabrics.observe().get(kind.instance))
             if v.invariant.startswith("ETH-BOND")]  # fmt: skip
    assert found == [(OUT_ID, "n2", "p4")]


def test_a_move_giving_the_node_a_tenant_over_that_bond_is_refused_naming_it(engine: MoveEngine) -> None:
    switch(engine).stray["p4"] = "po7"
    engine.forget()
    request(engine, "n2", "ta")
    with pytest.raises(ConflictError) as e:
        engine.run_pending()
    assert str(e.value) == REFUSAL
    assert (e.value.fields["node"], e.value.fields["port"], e.value.fields["channel"]) == ("n2", "p4", "po7")
    (m,) = [x for x in engine.ledger.moves() if x.node == "n2" and x.to_tenant == "ta"]
    assert m.status is MoveStatus.FAILED and REFUSAL in (m.error or "")
    assert owners(engine) == {"n1": {"ta"}, "n2": {QUARANTINE}}  # the failsafe: quarantine, never two tenants


def test_in_one_batch_only_the_refused_nodes_move_fails(engine: MoveEngine) -> None:
    switch(engine).stray["p4"] = "po7"
    engine.forget()
    request(engine, "n1", "tb")
    request(engine, "n2", "ta")
    batch = engine.run_pending()
    assert batch is not None
    got = {m.node: (m.status, m.error) for m in batch.moves}
    assert got == {"n1": (MoveStatus.DONE, ""), "n2": (MoveStatus.FAILED, f"join plan: {REFUSAL}")}
    assert owners(engine) == {"n1": {"tb"}, "n2": {QUARANTINE}}


def test_a_drifted_leased_bond_with_a_member_in_a_missing_channel_stops_no_other_plan(engine: MoveEngine) -> None:
    """n2's aggregate is also shut behind our back (it lacks its tenant's VLAN): n2 is not given it
    again (refused), and n1's move and a reconcile pass go on (both raised before)."""
    sw = switch(engine)
    sw.stray["p4"] = "po7"
    sw.set_port(EthernetPortConfig("leaf1", "po2", PortMode.SHUTDOWN))
    engine.forget()
    request(engine, "n1", "tb")
    batch = engine.run_pending()
    assert batch is not None and [(m.node, m.status) for m in batch.moves] == [("n1", MoveStatus.DONE)]
    result = reconcile_once(engine, Policy.REPAIR)
    assert result.drift.empty and set(result.drift.refusals()) == {"n2"}
    assert owners(engine) == {"n1": {"tb"}, "n2": {QUARANTINE}}
    assert sw.observe().port("po2") == EthernetPortConfig("leaf1", "po2", PortMode.SHUTDOWN)
