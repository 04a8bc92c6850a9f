"""What one move's failure does to its batch, and cancelling moves, over the in-memory fabrics
(issue 18, finding 3): the fabrics are read back after each run, never assumed."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpufabric.domain.auth import LOCAL_ADMIN, Principal, Role
from gpufabric.domain.errors import ApplyError, ConflictError, ForbiddenError, ValidationError
from gpufabric.domain.models import QUARANTINE, Inventory
from gpufabric.domain.moves import MovePhase, MoveRequest, MoveStatus
from gpufabric.domain.values import ModuleId
from gpufabric.engine.fabrics import Fabrics
from gpufabric.engine.moves import MoveEngine
from gpufabric.fabrics.nvlink.entries import Gpu, gpu_ports
from gpufabric.planning.plan import plan
from gpufabric.store.auth import EventLog
from gpufabric.store.core import Store
from gpufabric.store.registry import Registry
from gpufabric.workflow.actions import Actions

from support.memfabric import register
from unit.test_engine_memory import CFG, engine, fabrics_config, inventory, mem, move, owners

__all__ = ["engine"]  # the fixture
STANDIN = [sys.executable, "-m", "gpufabric.lab.fmpm_standin"]


def _actions(e: MoveEngine) -> Actions:
    return Actions(e.store, lambda: CFG)


def test_a_batch_where_one_lease_swap_fails_runs_the_others(engine: MoveEngine) -> None:
    engine.store.create_network("ta-two", "ta", CFG, kinds=engine.kinds)
    move(engine, "n3", "ta")
    bad = engine.ledger.request("n1", MoveRequest("ta", networks=("ta-two",)))
    good = engine.ledger.request_many(["n2", "n3"], MoveRequest("tb", networks=("tb-net",)))  # n3: from ta
    engine.store.delete_network("ta-two", "ta")  # after the request: only the swap can see it
    batch = engine.run_pending()
    assert batch is not None
    got = {m.node: (m.status, m.phase) for m in batch.moves}
    assert got == {"n1": (MoveStatus.FAILED, MovePhase.SWAP), "n2": (MoveStatus.DONE, MovePhase.DONE),
                   "n3": (MoveStatus.DONE, MovePhase.DONE)}  # fmt: skip
    assert engine.ledger.get(bad.id or 0).error == "lease swap: network not found: ta/ta-two"
    assert owners(engine) == {"n1": {QUARANTINE}, "n2": {"tb"}, "n3": {"tb"}}  # read from the fabrics
    assert plan(engine.kinds, engine.desired(), engine.fabrics.observe()).empty  # n1 held in quarantine
    assert [engine.ledger.get(m.id or 0).status for m in good] == [MoveStatus.DONE] * 2


def test_a_fabric_wide_failure_still_fails_the_whole_batch(engine: MoveEngine) -> None:
    mem(engine).faults.arm(ApplyError("injected memory failure", fabric="memory", device="x"),  # type: ignore[attr-defined]
                           when=lambda p: any(c.after == "tb" for c in p.changes))  # type: ignore[attr-defined]  # fmt: skip
    engine.ledger.request_many(["n1", "n2"], MoveRequest("tb", networks=("tb-net",)))
    with pytest.raises(ApplyError, match="injected"):
        engine.run_pending()
    assert {m.node: m.status for m in engine.ledger.moves()} == {"n1": MoveStatus.FAILED, "n2": MoveStatus.FAILED}
    assert owners(engine) == dict.fromkeys(("n1", "n2", "n3"), frozenset({QUARANTINE}))


def test_cancel_a_failed_move_keeps_its_node_in_quarantine_and_frees_it(engine: MoveEngine) -> None:
    move(engine, "n1", "ta")
    mem(engine).faults.arm(ApplyError("injected memory failure", fabric="memory", device="x"),  # type: ignore[attr-defined]
                           when=lambda p: any(c.after == "tb" for c in p.changes))  # type: ignore[attr-defined]  # fmt: skip
    m = engine.ledger.request("n1", MoveRequest("tb", networks=("tb-net",)))
    with pytest.raises(ApplyError):
        engine.run_pending()  # failed at join: the swap committed, n1's new lease (tb) is active
    act = _actions(engine)
    lessee = Principal("u", Role.LESSEE, "tb")
    with pytest.raises(ForbiddenError, match="role lessee may not create moves"):
        act.cancel_move(lessee, m.id or 0)
    done = act.cancel_move(LOCAL_ADMIN, m.id or 0)
    assert done.status is MoveStatus.CANCELLED
    assert [x for x in engine.store.leases(active_at=datetime.now(UTC)) if x.node == "n1"] == []
    engine.converge("after-cancel")
    assert owners(engine)["n1"] == {QUARANTINE} and engine.store.node("n1").state.value == "available"
    assert plan(engine.kinds, engine.desired(), engine.fabrics.observe()).empty
    latest = EventLog(engine.store).list(limit=1)[0]
    assert (latest.action, latest.outcome, latest.target, latest.tenant) == ("move.cancel", "ok", str(m.id), "tb")
    assert move(engine, "n1", "tb") == ["quarantine", "swap", "join"]  # the node can move again
    assert owners(engine)["n1"] == {"tb"}


def test_cancel_a_queued_move_leaves_the_node_in_its_tenant(engine: MoveEngine) -> None:
    move(engine, "n2", "ta")
    m = engine.ledger.request("n2", MoveRequest("tb", networks=("tb-net",)))
    engine.converge("reconcile")  # a converge before any worker prepared (drained) it: n2 stays in ta
    assert owners(engine)["n2"] == {"ta"}
    _actions(engine).cancel_move(LOCAL_ADMIN, m.id or 0)
    engine.converge("after-cancel")
    assert owners(engine)["n2"] == {"ta"} and engine.store.node("n2").state.value == "leased"
    assert engine.run_pending() is None


def test_a_running_move_cannot_be_cancelled(engine: MoveEngine) -> None:
    m = engine.ledger.request("n3", MoveRequest("ta", networks=("ta-net",)))
    seen: list[str] = []

    def try_cancel(_phase: str, msg: str) -> None:
        if "applying" in msg and not seen:
            with pytest.raises(ConflictError) as e:
                _actions(engine).cancel_move(LOCAL_ADMIN, m.id or 0)
            seen.append(e.value.message)

    engine.progress = try_cancel
    batch = engine.run_pending()
    assert batch is not None and [x.status for x in batch.moves] == [MoveStatus.DONE]
    assert seen and seen[0].startswith(f"move {m.id} is running (at quarantine)")
    assert owners(engine)["n3"] == {"ta"}


def _nvlink_engine(tmp_path: Path) -> MoveEngine:
    """The in-memory fabrics plus NVLink through the stand-in Fabric Manager (real ``fmpm``
    subprocesses, HGX 8-GPU boards) for n1 and n2, whose inventory has 8 GPUs each."""
    socks = {}
    for n in ("n1", "n2"):
        socks[n] = tmp_path / f"{n}.fm"
        init = subprocess.run([*STANDIN, "--unix-domain-socket", str(socks[n]), "--standin-init", "hgx-h100-8gpu"],
                              capture_output=True, text=True, check=False)  # fmt: skip
        assert init.returncode == 0, init.stderr
    reg = Registry.from_entry_points()
    register(reg)
    cfg = {**fabrics_config(), "nvlink": {"driver": "fmpm", "options": {
        "fm": {n: f"unix:{p}" for n, p in socks.items()}, "fmpm": STANDIN}}}  # fmt: skip
    fabrics = Fabrics.from_config(cfg, reg)
    store = Store.open(url=f"sqlite:///{tmp_path / 'g.db'}")
    inv = inventory()
    gpus = {n: gpu_ports(*(Gpu(n, ModuleId(m)) for m in range(1, 9))) for n in ("n1", "n2")}
    store.upsert_inventory(Inventory(tuple(dataclasses.replace(x, fabric_ports=gpus.get(x.name, ())) for x in inv.nodes)))
    for t in ("ta", "tb"):
        store.create_tenant(t)
        store.create_network(f"{t}-net", t, CFG, kinds=fabrics.kind_list())
    return MoveEngine(store, fabrics, CFG, worker="test:nv", heartbeat_every=60)


def _active(e: MoveEngine, node: str) -> list[tuple[int, ...]]:
    """The GPU module ids of the node's active partitions, read from its Fabric Manager now."""
    fm = e.fabrics.backends["nvlink"].observe().nodes[node]  # type: ignore[attr-defined]
    return sorted(tuple(sorted(p.gpus)) for p in fm.active_partitions())


def test_a_join_plan_that_fails_for_one_move_fails_it_alone(tmp_path: Path) -> None:
    """3 GPUs passes the request (the node has 8) but no HGX partition has 3: the join plan fails
    for that move alone; the other move of the batch gets its 4-GPU partition."""
    e = _nvlink_engine(tmp_path)
    try:
        bad = e.ledger.request("n1", MoveRequest("ta", networks=("ta-net",), terms=(("gpus", 3),)))
        good = e.ledger.request("n2", MoveRequest("tb", networks=("tb-net",), terms=(("gpus", 4),)))
        batch = e.run_pending()
        assert batch is not None
        got = {m.node: (m.status, m.phase) for m in batch.moves}
        assert got == {"n1": (MoveStatus.FAILED, MovePhase.SWAP), "n2": (MoveStatus.DONE, MovePhase.DONE)}
        error = e.ledger.get(bad.id or 0).error
        assert error.startswith("join plan: invalid gpus: 3") and "no partition of 3 GPUs" in error, error
        assert e.ledger.get(good.id or 0).status is MoveStatus.DONE
        assert owners(e)["n1"] == {QUARANTINE} and owners(e)["n2"] == {"tb"}
        assert [len(p) for p in _active(e, "n2")] == [4] and _active(e, "n1") == []  # read from FM
        assert plan(e.kinds, e.desired(), e.fabrics.observe()).empty
        _actions(e).cancel_move(LOCAL_ADMIN, bad.id or 0)
        alone = e.ledger.request("n1", MoveRequest("ta", networks=("ta-net",), terms=(("gpus", 3),)))  # a batch of one: fails as before
        with pytest.raises(ValidationError, match="no partition of 3 GPUs"):
            e.run_pending()
        assert e.ledger.get(alone.id or 0).status is MoveStatus.FAILED and owners(e)["n1"] == {QUARANTINE}
    finally:
        e.fabrics.close()
        e.store.close()
