"""MoveEngine, Fabrics.apply, reconcile and the audit over three in-memory fabrics
(Ethernet, InfiniBand, and the ``memory`` test fabric kind), on a SQLite store in tmp.

No root, no device: the fabrics are tests/support/memfabric, wired only through
``Registry.register_kind`` / ``Registry.register`` and a ``fabrics.yaml``-shaped mapping.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpufabric.domain.errors import ApplyError
from gpufabric.domain.models import QUARANTINE, Inventory
from gpufabric.domain.moves import MoveRequest, MoveStatus
from gpufabric.domain.values import Guid
from gpufabric.engine.audit_run import SPLIT_ID, audit
from gpufabric.engine.fabrics import Fabrics
from gpufabric.engine.moves import MoveEngine
from gpufabric.engine.reconcile import Policy, reconcile_once
from gpufabric.fabrics.ethernet.entries import EthernetPort
from gpufabric.fabrics.ethernet.segments import segment_vlan
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode
from gpufabric.fabrics.infiniband.entries import IbPort, all_ib_ports
from gpufabric.planning.plan import merge, plan, tenants_seen
from gpufabric.store.core import Store
from gpufabric.store.lock import read_epoch
from gpufabric.store.queries import Reader
from gpufabric.store.registry import Registry, parse_segments

from support import drivers
from support.memfabric import DRIFT_ID_MEMORY, MemoryBackend, MemorySubnetManager, MemorySwitchDriver, register
from support.ports import port_node

CFG = parse_segments()
SM = Guid(0x0002C90300FF0001)
NODES = ("n1", "n2", "n3")


def guid(n: int, port: int) -> Guid:
    return Guid(0x0002C90300000000 + n * 16 + port)


def inventory() -> Inventory:
    nodes = []
    for i, name in enumerate(NODES, start=1):
        eth = tuple(EthernetPort(name, f"eth{k}", "leaf1", f"p{2 * i + k - 1}") for k in range(2))
        ib = tuple(IbPort(name, f"mlx5_{k}", 1, guid(i, k), guid(i, 8 + k)) for k in range(2))
        nodes.append(port_node(name, ethernet=eth, ib=ib))
    return Inventory(tuple(nodes))


def fabrics_config() -> dict[str, Any]:
    return {
        "ethernet": [{"driver": "mem-switch", "options": {"switch": "leaf1", "ports": 8}}],
        "infiniband": {"driver": "mem-sm", "options": {"ports": [str(p.port_guid) for n in inventory().nodes for p in all_ib_ports(n)]}},
        "sm_port_guids": [str(SM)],
        "memory": {"driver": "mem-tags", "options": {}},
    }


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MoveEngine]:
    reg = Registry.from_entry_points()
    register(reg)
    fabrics = Fabrics.from_config(fabrics_config(), reg)
    store = Store.open(url=f"sqlite:///{tmp_path / 'g.db'}")
    store.upsert_inventory(inventory())
    for t in ("ta", "tb"):
        store.create_tenant(t)
        store.create_network(f"{t}-net", t, CFG, kinds=fabrics.kind_list())
    eng = MoveEngine(store, fabrics, CFG, worker="test:1", heartbeat_every=60)
    yield eng
    fabrics.close()
    store.close()


def switch(e: MoveEngine) -> MemorySwitchDriver:
    d = drivers.switches(e.fabrics)["leaf1"]
    assert isinstance(d, MemorySwitchDriver)
    return d


def sm(e: MoveEngine) -> MemorySubnetManager:
    d = drivers.sm(e.fabrics)
    assert isinstance(d, MemorySubnetManager)
    return d


def mem(e: MoveEngine) -> MemoryBackend:
    b = e.fabrics.backends["memory"]
    assert isinstance(b, MemoryBackend)
    return b


def owners(e: MoveEngine) -> dict[str, frozenset[str]]:
    """node -> tenants its ports hold on every fabric, read from the fabrics now."""
    return tenants_seen(e.kinds, e.desired(), e.fabrics.observe())


def move(e: MoveEngine, node: str, tenant: str) -> list[str]:
    nets = (f"{tenant}-net",) if tenant != QUARANTINE else ()
    e.ledger.request(node, MoveRequest(tenant, networks=nets))
    batch = e.run_pending()
    assert batch is not None
    assert [m.status for m in batch.moves] == [MoveStatus.DONE]
    return [t.phase for t in batch.timings]


def test_the_memory_kind_plugs_in_through_registration_only(engine: MoveEngine) -> None:
    assert [k.name for k in engine.kinds] == ["ethernet", "infiniband", "memory"]
    net = engine.store.network("ta-net", "ta")
    assert {str(s.fabric) for s in net.segments} == {"ethernet", "infiniband"}  # memory allocates none


def test_moves_run_quarantine_swap_join_on_all_three_fabrics(engine: MoveEngine) -> None:
    seen: list[dict[str, frozenset[str]]] = []
    engine.progress = lambda _phase, msg: seen.append(owners(engine)) if "verified" in msg else None
    assert move(engine, "n1", "ta") == ["quarantine", "swap", "join"]
    assert owners(engine)["n1"] == {"ta"}
    ta_vlan = segment_vlan(engine.store.network("ta-net", "ta").segments[0])
    assert switch(engine).observe().port("p1") == EthernetPortConfig("leaf1", "p1", PortMode.ACCESS, ta_vlan)
    assert dict(mem(engine).observe().tags)["n1/m0"] == "ta"
    assert move(engine, "n1", "tb") == ["quarantine", "swap", "join"]
    assert owners(engine) == {"n1": {"tb"}, "n2": {QUARANTINE}, "n3": {QUARANTINE}}
    # every verified step of every phase: no node in two tenants, on any fabric or across them
    assert seen and all(len(t - {QUARANTINE}) <= 1 for s in seen for t in s.values())
    assert any(s.get("n1") == {QUARANTINE} for s in seen)  # it passed through quarantine
    assert move(engine, "n1", QUARANTINE) == ["quarantine", "swap", "join"]
    assert owners(engine)["n1"] == {QUARANTINE}


def test_warm_engine_plans_from_its_read_back(engine: MoveEngine) -> None:
    move(engine, "n2", "ta")
    engine.ledger.request("n2", MoveRequest("tb", networks=("tb-net",)))
    batch = engine.run_pending()
    assert batch is not None
    # each phase's timing is recorded with the move's end (move show / the API detail)
    events = Reader(engine.store).move_events(batch.moves[0].id or 0)
    assert events[0]["phase"] == "prepared"  # before_move passed: from then on the move holds n2 in quarantine
    assert [(e["phase"], e["seconds"]) for e in events[1:]] == [(t.phase, round(t.seconds, 4)) for t in batch.timings]
    assert [t.observed_first for t in batch.timings if t.plan is not None] == [False, False]
    counts = {t.phase: t.plan.counts() for t in batch.timings if t.plan is not None}
    assert all(counts["quarantine"][f] > 0 and counts["join"][f] > 0 for f in ("ethernet", "infiniband", "memory"))


def test_fabrics_apply_returns_the_read_back_of_each_fabric(engine: MoveEngine) -> None:
    engine.converge("init")  # the memory fabric starts with no tags at all
    engine.ledger.request("n3", MoveRequest("ta", networks=("ta-net",)))
    engine.ledger.claim("w", 1)
    engine.ledger.swap_lease(engine.ledger.moves()[0])
    desired = engine.desired()
    observed = engine.fabrics.observe()
    p = plan(engine.kinds, desired, observed)
    read_back, timings = engine.fabrics.apply(p)
    assert set(read_back) == set(timings) == {"ethernet", "infiniband", "memory"}
    assert {pt.port for sw in read_back["ethernet"] for pt in sw.ports} == {"p5", "p6"}
    assert {t.port_guid for t in read_back["infiniband"].tables} == {guid(3, 0), guid(3, 1)}
    assert dict(read_back["memory"].tags) == {"n3/m0": "ta", "n3/m1": "ta"}
    assert plan(engine.kinds, desired, merge(engine.kinds, observed, read_back)).empty
    assert plan(engine.kinds, desired, engine.fabrics.observe()).empty


def test_reconcile_repairs_drift_on_every_fabric(engine: MoveEngine) -> None:
    move(engine, "n1", "ta")
    tb = engine.store.network("tb-net", "tb").segments
    tb_vlan = next(segment_vlan(s) for s in tb if segment_vlan(s))
    switch(engine).set_port(EthernetPortConfig("leaf1", "p2", PortMode.ACCESS, tb_vlan))
    sm(engine).set_table(guid(2, 0), [0xFFFF])  # a host made full member of the default partition
    mem(engine).set_tag("n3/m1", "tb")
    report = reconcile_once(engine, Policy.REPORT)
    assert not report.repaired
    assert report.drift.counts() == {"ethernet": 1, "infiniband": 2, "memory": 1}
    assert not plan(engine.kinds, engine.desired(), engine.fabrics.observe()).empty
    repaired = reconcile_once(engine, Policy.REPAIR)
    assert repaired.repaired
    assert plan(engine.kinds, engine.desired(), engine.fabrics.observe()).empty
    assert reconcile_once(engine, Policy.REPORT).drift.empty


def test_audit_reports_the_memory_invariant_and_cross_fabric_split(engine: MoveEngine) -> None:
    move(engine, "n1", "ta")
    clean = audit(engine)
    assert clean.ok, [v.message for v in clean.violations]
    assert DRIFT_ID_MEMORY in clean.checked and SPLIT_ID in clean.checked
    mem(engine).set_tag("n1/m1", "tb")  # n1 is ta on Ethernet/IB, tb on one memory port
    report = audit(engine)
    ids = {v.invariant for v in report.violations}
    assert {DRIFT_ID_MEMORY, SPLIT_ID} <= ids
    split = next(v for v in report.violations if v.invariant == SPLIT_ID)
    assert split.node == "n1" and split.tenants == ("ta", "tb")
    drift = next(v for v in report.violations if v.invariant == DRIFT_ID_MEMORY)
    assert drift.port == "n1/m1" and drift.fabric == "memory"


@pytest.mark.parametrize("failing", ["ethernet", "infiniband", "memory"])
def test_join_failure_quarantines_everywhere_then_retry_converges(engine: MoveEngine, failing: str) -> None:
    move(engine, "n1", "ta")
    err = ApplyError(f"injected {failing} failure", fabric=failing, device="x")
    if failing == "ethernet":
        switch(engine).faults.arm(err, when=lambda ch: any(c.mode is not PortMode.SHUTDOWN for c in ch))  # type: ignore[attr-defined]
    elif failing == "infiniband":
        sm(engine).faults.arm(err, when=lambda layout: bool(layout.partitions))  # type: ignore[attr-defined]
    else:
        mem(engine).faults.arm(err, when=lambda p: any(c.after == "tb" for c in p.changes))  # type: ignore[attr-defined]
    m = engine.ledger.request("n1", MoveRequest("tb", networks=("tb-net",)))
    with pytest.raises(ApplyError, match="injected"):
        engine.run_pending()
    failed = engine.ledger.get(m.id or 0)
    assert failed.status is MoveStatus.FAILED and failed.phase.value == "join"
    assert "injected" in failed.error
    assert owners(engine)["n1"] == {QUARANTINE}  # on every fabric
    eth = switch(engine).observe()
    assert {eth.port(p).mode for p in ("p1", "p2")} == {PortMode.SHUTDOWN}  # type: ignore[union-attr]
    assert plan(engine.kinds, engine.desired(), engine.fabrics.observe()).empty  # held in quarantine: no drift
    engine.ledger.retry(m.id or 0)
    batch = engine.run_pending()
    assert batch is not None and [x.status for x in batch.moves] == [MoveStatus.DONE]
    assert owners(engine)["n1"] == {"tb"}
    assert audit(engine).ok


def test_a_write_makes_every_other_warm_worker_read_the_fabrics_first(engine: MoveEngine) -> None:
    other = MoveEngine(engine.store, engine.fabrics, CFG, worker="test:2", heartbeat_every=60)
    move(other, "n3", "ta")  # warm
    move(engine, "n1", "ta")  # another worker wrote to the fabrics
    other.ledger.request("n3", MoveRequest("tb", networks=("tb-net",)))
    batch = other.run_pending()
    assert batch is not None
    assert [(t.phase, t.observed_first) for t in batch.timings if t.plan is not None] == [
        ("quarantine", True), ("join", False)]  # fmt: skip
    # the epoch moves before a worker's first change, so a write that dies mid-apply counts too
    at_fault: list[tuple[int, str]] = []
    before = read_epoch(engine.store)
    err = ApplyError("injected infiniband failure", fabric="infiniband", device="x")
    sm(engine).faults.arm(err, when=lambda _layout: bool(at_fault.append(read_epoch(engine.store))) or True)  # type: ignore[attr-defined]
    engine.ledger.request("n2", MoveRequest("ta", networks=("ta-net",)))
    with pytest.raises(ApplyError, match="injected"):
        engine.run_pending()
    assert at_fault and at_fault[0][0] == before[0] + 1 and at_fault[0][1] == engine.worker
