"""Move requests checked when they are made, a lease swap that fails one move only, cancelling a
move, and requeueing a batch the store dropped (SQLite and PostgreSQL; issue 18, findings 3, 9).

Each refusal names the field and what is allowed, and records nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.errors import ConflictError, NotFoundError, ValidationError
from gpufabric.domain.models import QUARANTINE, Inventory, Lease
from gpufabric.domain.moves import MovePhase, MoveRequest, MoveStatus
from gpufabric.domain.values import ModuleId
from gpufabric.fabrics.ethernet.entries import EthernetPort
from gpufabric.fabrics.nvlink.entries import Gpu, gpu_ports
from gpufabric.store.core import Store
from gpufabric.store.move_cancel import cancel
from gpufabric.store.moves import MoveLedger
from gpufabric.store.registry import parse_segments
from gpufabric.workflow.tenancy import TenantWorkflow

from support.ports import port_node

CFG = parse_segments()


@pytest.fixture
def store(store_url: str) -> Store:
    s = Store.open(url=store_url)
    nodes = [port_node(f"n{i}", ethernet=(EthernetPort(f"n{i}", "eth0", "leaf1", f"p{i}"),)) for i in range(1, 5)]
    nodes.append(port_node("g1", ethernet=(EthernetPort("g1", "eth0", "leaf1", "p9"),),
                      fabric_ports=gpu_ports(*(Gpu("g1", ModuleId(m)) for m in (1, 2)))))  # fmt: skip
    s.upsert_inventory(Inventory(tuple(nodes)))
    for t in ("ta", "tb"):
        s.create_tenant(t)
        s.create_network(f"{t}-net", t, CFG)
    s.create_network("ta-two", "ta", CFG)
    s.create_tenant("empty")
    return s


def _nothing_recorded(store: Store, ledger: MoveLedger) -> None:
    assert ledger.moves() == []
    assert {n.name: n.state.value for n in store.nodes()} == dict.fromkeys(("g1", "n1", "n2", "n3", "n4"), "available")


def test_networks_offering_and_gpus_are_checked_when_a_move_is_requested(store: Store) -> None:
    ledger = MoveLedger(store)
    flow = TenantWorkflow(store)
    refusals = [
        (lambda: ledger.request("n1", MoveRequest("ta", networks=("nope",))),
         "invalid networks: 'nope'; allowed: networks of tenant ta: ta-net, ta-two"),
        (lambda: ledger.request("n1", MoveRequest("ta", networks=("ta-net", "tb-net"))),  # another tenant's network
         "invalid networks: 'tb-net'; allowed: networks of tenant ta: ta-net, ta-two"),
        (lambda: ledger.request("n1", MoveRequest("empty", networks=("x",))),
         "invalid networks: 'x'; allowed: none yet (tenant empty has no networks: create one first)"),
        (lambda: ledger.request("n1", MoveRequest(QUARANTINE, networks=("ta-net",))),
         "invalid networks: 'ta-net'; allowed: none (quarantine joins no network)"),
        (lambda: ledger.request("n1", MoveRequest("ta", "nosuch", ("ta-net",))), "invalid offering: 'nosuch'; allowed: baremetal, "),
        # a GPU count is the NVLink kind's to refuse (FabricKind.check_request), asked by the workflow
        (lambda: flow.move(LOCAL_ADMIN, "n1", "ta", ("ta-net",), terms=(("gpus", 4),)),
         "invalid gpus: 4; allowed: unset (node n1 has no GPUs in the inventory)"),
        (lambda: flow.move(LOCAL_ADMIN, "g1", "ta", ("ta-net",), terms=(("gpus", 4),)),
         "invalid gpus: 4; allowed: 1-2 (the GPUs of node g1), or unset for all"),
        (lambda: flow.grant(LOCAL_ADMIN, "ta", "g1", ("ta-net",), terms=(("gpus", 4),)), "invalid gpus: 4"),  # a grant: the same checks
        (lambda: flow.move_many(LOCAL_ADMIN, ["g1", "n1"], "ta", ("ta-net",), terms=(("gpus", 2),)),  # all or none
         "invalid gpus: 2; allowed: unset (node n1 has no GPUs in the inventory)"),
        (lambda: ledger.request_many(["n1", "n2"], MoveRequest("ta", networks=("ta-net", "nope"))),  # all or none
         "invalid networks: 'nope'"),
    ]  # fmt: skip
    for call, message in refusals:
        with pytest.raises(ValidationError) as e:
            call()
        assert message in e.value.message
        assert "\n" not in e.value.message
        _nothing_recorded(store, ledger)
    ok = flow.move(LOCAL_ADMIN, "g1", "ta", ("ta-two",), "openshift", terms=(("gpus", 2),))
    assert (ok.networks, ok.offering, ok.term("gpus"), ok.status) == (("ta-two",), "openshift", 2, MoveStatus.PENDING)


def test_a_lease_swap_that_fails_fails_that_move_only(store: Store) -> None:
    """The network of one move is deleted after its request: at the swap that move fails alone (its
    node held in quarantine), the other moves of the batch swap (finding 3 once requests pass)."""
    ledger = MoveLedger(store)
    store.create_lease(Lease("ta", "n3", datetime.now(UTC) - timedelta(hours=1), networks=("ta-net",)))
    bad = ledger.request("n1", MoveRequest("ta", networks=("ta-two",)))
    good = ledger.request_many(["n2", "n3"], MoveRequest("tb", networks=("tb-net",)))
    store.delete_network("ta-two", "ta")
    batch = ledger.claim("w", limit=10)
    out = {m.node: m for m in ledger.swap_leases(batch)}
    assert (out["n1"].status, out["n1"].phase) == (MoveStatus.FAILED, MovePhase.SWAP)
    assert out["n1"].error == "lease swap: network not found: ta/ta-two"
    assert {(out[n].status, out[n].phase) for n in ("n2", "n3")} == {(MoveStatus.RUNNING, MovePhase.JOIN)}
    active = sorted((x.node, x.tenant) for x in store.leases(active_at=datetime.now(UTC) + timedelta(seconds=1)))
    assert active == [("n2", "tb"), ("n3", "tb")]
    assert ledger.get(bad.id or 0).status is MoveStatus.FAILED and {m.id for m in good} <= {m.id for m in batch}


def test_cancel_a_move_that_never_started_leaves_its_node_where_it_is(store: Store) -> None:
    ledger = MoveLedger(store)
    lease = store.create_lease(Lease("ta", "n3", datetime.now(UTC) - timedelta(hours=1), networks=("ta-net",)))
    queued = ledger.request("n3", MoveRequest("tb", networks=("tb-net",)))
    scheduled = ledger.request("n1", MoveRequest("ta", networks=("ta-net",), grant=True, not_before=datetime.now(UTC) + timedelta(hours=1)))  # fmt: skip
    a = cancel(store, queued.id or 0, "admin:ops")
    b = cancel(store, scheduled.id or 0)
    assert (a.status, b.status) == (MoveStatus.CANCELLED, MoveStatus.CANCELLED)
    assert [x.id for x in store.leases(active_at=datetime.now(UTC)) if x.node == "n3"] == [lease.id]  # untouched
    assert (store.node("n3").state.value, store.node("n1").state.value) == ("leased", "available")
    assert ledger.open_moves() == [] and ledger.claim("w", 10) == []
    assert ledger.request("n3", MoveRequest("tb", networks=("tb-net",))).status is MoveStatus.PENDING  # the node is free again


def test_cancel_a_failed_move_returns_its_node_to_quarantine(store: Store) -> None:
    ledger = MoveLedger(store)
    store.create_lease(Lease("ta", "n2", datetime.now(UTC) - timedelta(hours=1), networks=("ta-net",)))
    before_swap = ledger.request("n2", MoveRequest("tb", networks=("tb-net",)))
    after_swap = ledger.request("n4", MoveRequest("tb", networks=("tb-net",)))
    ms = {m.node: m for m in ledger.claim("w", 10)}
    ledger.fail(ms["n2"], "switch leaf1 did not answer")  # in quarantine, the old lease still active
    ledger.fail(ledger.swap_lease(ms["n4"]), "OpenSM did not answer")  # swapped: the new lease active
    for m in (before_swap, after_swap):
        got = cancel(store, m.id or 0, "admin:ops")
        assert got.status is MoveStatus.CANCELLED and "did not answer" in got.error  # why it failed is kept
    assert [x for x in store.leases(active_at=datetime.now(UTC)) if x.node in ("n2", "n4")] == []
    assert store.node("n2").state.value == store.node("n4").state.value == "available"
    with pytest.raises(ConflictError, match=r"move \d+ is cancelled"):
        cancel(store, before_swap.id or 0)


def test_a_running_or_finished_move_cannot_be_cancelled(store: Store) -> None:
    ledger = MoveLedger(store)
    m = ledger.request("n1", MoveRequest("ta", networks=("ta-net",)))
    (running,) = ledger.claim("w", 1)
    with pytest.raises(ConflictError) as e:
        cancel(store, m.id or 0)
    assert e.value.message.startswith(f"move {m.id} is running (at quarantine)")
    assert (e.value.fields["field"], e.value.fields["value"]) == ("status", "running")
    assert ledger.get(m.id or 0).status is MoveStatus.RUNNING and store.node("n1").state.value == "moving"
    ledger.set_phase(running, MovePhase.DONE)
    with pytest.raises(ConflictError, match="is done"):
        cancel(store, m.id or 0)
    with pytest.raises(NotFoundError, match="move not found: 999"):
        cancel(store, 999)


def test_a_dropped_batch_is_requeued_only_where_this_worker_still_holds_it(store: Store) -> None:
    ledger = MoveLedger(store)
    ledger.request_many(["n1", "n2"], MoveRequest("ta", networks=("ta-net",)))
    mine = ledger.claim("w1", 10)
    (taken,) = ledger.claim("w2", 1, stale_after=0)  # n1 went stale: another worker has it
    back = ledger.requeue(mine, "OperationalError: connection refused")
    assert [m.node for m in back] == ["n2"] and back[0].status is MoveStatus.PENDING
    assert ledger.get(taken.id or 0).claimed_by == "w2"
    again = ledger.claim_ids("w1", [m.id or 0 for m in mine])
    assert [(m.node, m.attempts) for m in again] == [("n2", 2)]
