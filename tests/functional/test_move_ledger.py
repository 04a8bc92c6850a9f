"""Move intents in the store (SQLite and PostgreSQL): one open move per node, claims that
never hand a move to two workers, the lease swap in one transaction, fail/retry, and
expired leases falling out of the desired state (their nodes go to quarantine)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from gpufabric.domain.errors import ConflictError, NotFoundError, ValidationError
from gpufabric.domain.models import QUARANTINE, Inventory, Lease
from gpufabric.domain.moves import MovePhase, MoveRequest, MoveStatus
from gpufabric.engine.fabrics import Fabrics
from gpufabric.engine.moves import MoveEngine
from gpufabric.fabrics.ethernet.entries import EthernetPort
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.ethernet.state import PortMode
from gpufabric.store.core import Store
from gpufabric.store.moves import ClaimLostError, MoveLedger, worker_dead
from gpufabric.store.registry import parse_segments
from gpufabric.store.tables import LeaseRow

from support.ports import port_node

CFG = parse_segments()


@pytest.fixture
def store(store_url: str) -> Store:
    s = Store.open(url=store_url)
    nodes = tuple(port_node(f"n{i}", ethernet=(EthernetPort(f"n{i}", "eth0", "leaf1", f"p{i}"),)) for i in range(1, 7))
    s.upsert_inventory(Inventory(nodes))
    for t in ("ta", "tb"):
        s.create_tenant(t)
        s.create_network(f"{t}-net", t, CFG)
    return s


def test_request_validates_and_allows_one_open_move_per_node(store: Store) -> None:
    ledger = MoveLedger(store)
    with pytest.raises(NotFoundError, match="tenant not found: nosuch"):
        ledger.request("n1", MoveRequest("nosuch", networks=("x",)))
    with pytest.raises(ValidationError, match="gpus"):
        ledger.request("n1", MoveRequest("ta", networks=("ta-net",), terms=(("gpus", 99),)))
    m = ledger.request("n1", MoveRequest("ta", networks=("ta-net",)))
    assert (m.from_tenant, m.to_tenant, m.phase, m.status) == (
        QUARANTINE,
        "ta",
        MovePhase.QUARANTINE,
        MoveStatus.PENDING,
    )
    with pytest.raises(ConflictError, match="already has open move"):
        ledger.request("n1", MoveRequest("tb", networks=("tb-net",)))
    assert store.node("n1").state.value == "moving"


def test_concurrent_claims_never_share_a_move(store: Store) -> None:
    ledger = MoveLedger(store)
    ids = {ledger.request(f"n{i}", MoveRequest("ta", networks=("ta-net",))).id for i in range(1, 7)}
    got: dict[str, list[int]] = {}

    def claim(worker: str) -> None:
        got[worker] = [m.id for m in MoveLedger(store).claim(worker, limit=3) if m.id is not None]

    threads = [threading.Thread(target=claim, args=(f"w{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    claimed = [i for ms in got.values() for i in ms]
    assert sorted(claimed) == sorted(ids) and len(claimed) == len(set(claimed))
    assert ledger.claim("late", limit=10) == []  # nothing pending, nothing stale
    assert {m.id for m in ledger.claim("rescuer", limit=10, stale_after=0)} == ids  # a dead worker's moves


def test_swap_ends_the_old_lease_and_starts_the_new_in_one_step(store: Store) -> None:
    ledger = MoveLedger(store)
    store.create_lease(Lease("ta", "n2", datetime.now(UTC) - timedelta(hours=1), networks=("ta-net",)))
    m = ledger.request("n2", MoveRequest("tb", "openshift", ("tb-net",)))
    assert m.from_tenant == "ta"
    (m,) = ledger.claim("w", 1)
    m = ledger.swap_lease(ledger.set_phase(m, MovePhase.SWAP))
    assert m.phase is MovePhase.JOIN
    active = [x for x in store.leases(active_at=datetime.now(UTC) + timedelta(seconds=1)) if x.node == "n2"]
    assert [(x.tenant, x.offering, x.networks) for x in active] == [("tb", "openshift", ("tb-net",))]
    assert len([x for x in store.leases() if x.node == "n2"]) == 2
    done = ledger.set_phase(m, MovePhase.DONE)
    assert done.status is MoveStatus.DONE and store.node("n2").state.value == "leased"
    assert store.node("n2").offering == "openshift"


def test_failed_move_is_retried_from_its_phase(store: Store) -> None:
    ledger = MoveLedger(store)
    ledger.request("n3", MoveRequest("ta", networks=("ta-net",)))
    (m,) = ledger.claim("w", 1)
    m = ledger.fail(ledger.set_phase(m, MovePhase.SWAP), "OpenSM did not answer")
    assert (m.status, m.phase, m.error) == (MoveStatus.FAILED, MovePhase.SWAP, "OpenSM did not answer")
    assert ledger.claim("w2", 5) == []  # failed moves wait for an explicit retry
    again = ledger.retry(m.id or 0)
    assert (again.status, again.phase) == (MoveStatus.PENDING, MovePhase.SWAP)
    with pytest.raises(ConflictError, match="not failed"):
        ledger.retry(m.id or 0)


def test_expired_lease_and_moves_in_flight_shape_the_desired_state(store: Store) -> None:
    now = datetime.now(UTC)
    store.create_lease(Lease("ta", "n4", now - timedelta(hours=2), now - timedelta(hours=1), ("ta-net",)))
    store.create_lease(Lease("tb", "n5", now - timedelta(hours=1), None, ("tb-net",)))
    store.create_lease(Lease("tb", "n6", now - timedelta(hours=1), None, ("tb-net",)))
    m6 = MoveLedger(store).request("n6", MoveRequest("ta", networks=("ta-net",)))
    engine = MoveEngine(store, Fabrics(kinds={"ethernet": EthernetKind()}), CFG)
    assert engine.desired().owner("n6") == "tb"  # requested, not yet prepared (drained): still its tenant's
    MoveLedger(store).mark_prepared([m6])  # its before_move passed: quarantined until its swap
    desired = engine.desired()
    sw = next(s for s in desired.get("ethernet") if s.switch == "leaf1")
    modes = {p.port: p.mode for p in sw.ports}
    assert modes["p4"] is PortMode.SHUTDOWN, "an expired lease sends the node to quarantine"
    assert modes["p5"] is PortMode.ACCESS and modes["p6"] is PortMode.SHUTDOWN
    assert desired.owner("n4") == QUARANTINE and desired.owner("n5") == "tb" and desired.owner("n6") == QUARANTINE


def _dead_pid() -> int:
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_move_of_a_dead_worker_on_this_host_is_reclaimed_at_once_a_live_one_is_not(store: Store) -> None:
    import os

    ledger = MoveLedger(store)
    ledger.request("n1", MoveRequest("ta", networks=("ta-net",)))
    ledger.request("n2", MoveRequest("ta", networks=("ta-net",)))
    host = os.uname().nodename
    dead = f"{host}:{_dead_pid()}"
    assert worker_dead(dead) and worker_dead(f"{dead}:serve") and not worker_dead(f"{host}:{os.getpid()}:serve")
    assert not worker_dead(f"{host}:{os.getpid()}") and not worker_dead("elsewhere:1")
    assert [m.node for m in ledger.claim(f"{host}:{os.getpid()}", limit=1)] == ["n1"]
    assert [m.node for m in ledger.claim(dead, limit=1)] == ["n2"]
    # n2's worker is gone: taken over at once, long before stale_after; n1's worker lives: kept
    got = ledger.claim("other:1", stale_after=3600)
    assert [m.node for m in got] == ["n2"] and got[0].attempts == 2


def test_updates_are_fenced_by_the_claim_and_heartbeats_keep_a_claim_fresh(store: Store) -> None:
    ledger = MoveLedger(store)
    ledger.request("n3", MoveRequest("ta", networks=("ta-net",)))
    (mine,) = ledger.claim("w-old:1")
    assert ledger.heartbeat([mine], "w-old:1") == 1
    assert ledger.claim("w-new:1", stale_after=3600) == []  # fresh heartbeat: not stale
    (theirs,) = ledger.claim("w-new:1", stale_after=0.0)  # stale: another worker takes it
    assert ledger.heartbeat([mine], "w-old:1") == 0
    with pytest.raises(ClaimLostError, match="held by w-new:1"):
        ledger.set_phase(mine, MovePhase.SWAP)
    assert ledger.set_phase(theirs, MovePhase.SWAP).phase is MovePhase.SWAP


def test_ended_leases_are_due_a_release_and_ids_are_never_reused(store: Store) -> None:
    ledger = MoveLedger(store)
    now = datetime.now(UTC)
    m = ledger.request("n4", MoveRequest("ta", networks=("ta-net",), lease_end=now + timedelta(hours=1)))
    (m,) = ledger.claim("w:1")
    m = ledger.swap_lease(ledger.set_phase(m, MovePhase.SWAP))
    ledger.set_phase(m, MovePhase.DONE)
    lease = next(x for x in store.leases() if x.node == "n4")
    assert lease.end is not None and store.node("n4").state.value == "leased"
    assert ledger.expired_nodes() == []
    with store.tx() as tx:  # the lease's end passes (a sleep to a near end flaked on a loaded CI machine)
        row = tx.session.get(LeaseRow, lease.id)
        assert row is not None
        ended = datetime.now(UTC)
        row.start, row.end = ended - timedelta(seconds=2), ended - timedelta(seconds=1)
    assert ledger.expired_nodes() == ["n4"]
    rel = ledger.request("n4", MoveRequest(QUARANTINE, release_ended=True))
    assert (rel.from_tenant, rel.to_tenant) == ("ta", QUARANTINE)  # the tenant whose lease ended
    assert ledger.expired_nodes() == []  # it has an open move now
    with pytest.raises(ConflictError):
        ledger.request("n5", MoveRequest(QUARANTINE, release_ended=True))  # never leased: nothing to release
    store.delete_lease(lease.id or 0)
    new = store.create_lease(Lease("tb", "n5", now, None, ("tb-net",)))
    assert new.id is not None and lease.id is not None and new.id > lease.id


def test_a_request_of_several_nodes_is_all_or_none(store: Store) -> None:
    ledger = MoveLedger(store)
    store.create_lease(Lease("ta", "n2", datetime.now(UTC) - timedelta(hours=1), networks=("ta-net",)))
    ledger.request("n4", MoveRequest("tb", networks=("tb-net",)))  # n4 already has an open move
    with pytest.raises(ConflictError, match="node n4 already has open move"):
        ledger.request_many(["n1", "n2", "n4"], MoveRequest("tb", networks=("tb-net",)))
    with pytest.raises(NotFoundError, match="node not found: nope"):
        ledger.request_many(["n1", "nope"], MoveRequest("tb", networks=("tb-net",)))
    with pytest.raises(ValidationError, match="nodes"):
        ledger.request_many(["n1", "n1"], MoveRequest("tb", networks=("tb-net",)))
    assert [m.node for m in ledger.open_moves()] == ["n4"]  # nothing of the refused requests
    assert store.node("n1").state.value == "available"
    ms = ledger.request_many(["n1", "n2", "n3"], MoveRequest("tb", networks=("tb-net",)))
    assert [(m.node, m.from_tenant, m.to_tenant) for m in ms] == [("n1", QUARANTINE, "tb"), ("n2", "ta", "tb"),
                                                                 ("n3", QUARANTINE, "tb")]  # fmt: skip
    assert {m.id for m in ledger.claim("w", limit=10)} == {m.id for m in ms} | {ledger.open_moves()[0].id}
    swapped = ledger.swap_leases(ledger.claim("w2", limit=10, stale_after=0))
    assert {m.phase for m in swapped} == {MovePhase.JOIN}
    assert sorted((x.node, x.tenant) for x in store.leases(active_at=datetime.now(UTC))) == [
        ("n1", "tb"), ("n2", "tb"), ("n3", "tb"), ("n4", "tb")]  # fmt: skip
