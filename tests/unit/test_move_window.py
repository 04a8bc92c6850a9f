"""When the move worker waits before it claims (issue 31, item 10).

A lone move, with no batch running, is claimed at once: the worker never sleeps its coalescing
window first (it used to sleep it before every claim, 0.05 s with serve's defaults, a third of
a served move). What it coalesces: the moves requested together (one request: one batch) and
the moves that arrive while a batch runs (the next pass claims them all as one batch); the
window is spent only when another worker's batch runs (a claim now would wait for the fabric
lock anyway). The order of the worker's calls is asserted, not their time."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.moves import MoveRequest, MoveStatus
from gpufabric.engine import moves as moves_mod
from gpufabric.engine.moves import MoveEngine
from gpufabric.runtime.loops import MoveProgress
from gpufabric.store.core import Store
from gpufabric.store.moves import MoveLedger
from gpufabric.store.queries import Reader

from support.workers import memory_fabrics, seed
from unit.test_engine_memory import CFG

WINDOW = 0.05  # serve's default --window


def _req(tenant: str) -> MoveRequest:
    return MoveRequest(tenant, "baremetal", (f"{tenant}-net",))


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MoveEngine]:
    """The 3-node in-memory world (n1..n3; tenants ta, tb), worker ``test:1``."""
    f = memory_fabrics()
    store = Store.open(url=f"sqlite:///{tmp_path / 'g.db'}")
    seed(store, f)
    yield MoveEngine(store, f, CFG, worker="test:1", heartbeat_every=60)
    f.close()
    store.close()


@pytest.fixture
def calls(engine: MoveEngine, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, Any]]]:
    """The worker's sleeps and claims, in order (a sleep still sleeps, a claim still claims)."""
    seen: list[tuple[str, Any]] = []
    real_sleep, real_claim = time.sleep, engine.ledger.claim

    def sleep(seconds: float) -> None:
        seen.append(("sleep", seconds))
        real_sleep(seconds)

    def claim(*a: Any, **k: Any) -> Any:
        out = real_claim(*a, **k)
        seen.append(("claim", [m.node for m in out]))
        return out

    monkeypatch.setattr(moves_mod.time, "sleep", sleep)
    monkeypatch.setattr(engine.ledger, "claim", claim)
    yield seen


def test_a_lone_move_is_claimed_without_sleeping_the_window(engine: MoveEngine, calls: list[tuple[str, Any]]) -> None:
    engine.ledger.request("n1", _req("ta"))
    res = engine.run_pending(window=WINDOW)
    assert res is not None and [(m.node, m.status) for m in res.moves] == [("n1", MoveStatus.DONE)]
    assert calls == [("claim", ["n1"])]  # was [("sleep", 0.05), ("claim", ["n1"])]


def test_moves_requested_together_are_one_batch_claimed_at_once(
    engine: MoveEngine, calls: list[tuple[str, Any]]
) -> None:
    engine.ledger.request_many(["n1", "n2", "n3"], _req("ta"))
    res = engine.run_pending(window=WINDOW)
    assert res is not None and sorted(m.node for m in res.moves) == ["n1", "n2", "n3"]
    assert all(m.status is MoveStatus.DONE for m in res.moves)
    assert calls == [("claim", ["n1", "n2", "n3"])]


def test_moves_arriving_while_a_batch_runs_are_the_next_batch(engine: MoveEngine, calls: list[tuple[str, Any]]) -> None:
    arrived: list[str] = []

    def progress(phase: str, _message: str) -> None:  # called mid-batch: requests arrive now
        if phase == "quarantine" and not arrived:
            arrived.extend(["n2", "n3"])
            for n in arrived:
                engine.ledger.request(n, _req("tb"))

    engine.progress = progress
    engine.ledger.request("n1", _req("ta"))
    first = engine.run_pending(window=WINDOW)
    assert first is not None and [m.node for m in first.moves] == ["n1"] and arrived == ["n2", "n3"]
    second = engine.run_pending(window=WINDOW)
    assert second is not None and [m.node for m in second.moves] == ["n2", "n3"]
    assert all(m.status is MoveStatus.DONE for m in second.moves)
    assert calls == [("claim", ["n1"]), ("claim", ["n2", "n3"])]  # no window: they waited for the batch


def test_the_window_is_spent_while_another_workers_batch_runs(engine: MoveEngine, calls: list[tuple[str, Any]]) -> None:
    other = MoveEngine(engine.store, engine.fabrics, engine.cfg, worker="test:2", heartbeat_every=60)
    engine.ledger.request("n1", _req("ta"))
    assert [m.node for m in other.ledger.claim(other.worker)] == ["n1"]  # test:2 runs n1 (its heartbeat fresh)
    assert engine.run_pending(window=WINDOW) is None  # nothing to claim; it saw test:2's move running
    engine.ledger.request("n2", _req("tb"))
    res = engine.run_pending(window=WINDOW)
    assert res is not None and [(m.node, m.status) for m in res.moves] == [("n2", MoveStatus.DONE)]
    assert calls == [("claim", []), ("sleep", WINDOW), ("claim", ["n2"])]


def test_progress_is_written_off_the_engine_path_and_stored_before_the_moves_end(
    engine: MoveEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """serve's MoveProgress writes the engine's messages from its own thread: the engine applies
    without waiting for their commit (here the store's write waits for the first apply, which
    comes first). The engine settles it (flush) before it records a phase's end, so every
    progress event of a move is stored, before its end: a late one would find the move no
    longer running and be dropped."""
    write = MoveLedger.record_running_many
    order: list[str] = []
    applied = threading.Event()

    def gated(self: MoveLedger, worker: str, events: Any) -> None:
        applied.wait(10)  # a commit that takes its time (fsync on a busy disk)
        write(self, worker, events)
        order.extend(f"stored {m}" for _p, m, _s in events)

    monkeypatch.setattr(MoveLedger, "record_running_many", gated)
    progress = MoveProgress(engine.store, engine.worker)
    given: list[str] = []

    def give(phase: str, message: str) -> None:
        given.append(message)
        progress(phase, message)

    engine.progress, engine.settle = give, progress.flush
    apply = engine.fabrics.apply

    def first(*a: Any, **k: Any) -> Any:
        if not applied.is_set():
            order.append("apply")
            applied.set()
        return apply(*a, **k)

    monkeypatch.setattr(engine.fabrics, "apply", first)
    engine.ledger.request("n1", _req("ta"))
    res = engine.run_pending()
    assert res is not None and res.moves[0].status is MoveStatus.DONE and res.moves[0].id is not None
    assert order[0] == "apply" and "stored checking and preparing 1 node(s) on every fabric" in order
    events, _ = Reader(engine.store).move_progress(LOCAL_ADMIN, res.moves[0].id)
    reports = [e for e in events if e["message"] in given]  # (the ledger's own events besides)
    ends = [e for e in events if e["seconds"] is not None]  # the phases' timings, written with the move's end
    assert [e["message"] for e in reports] == given and sum("applying" in m for m in given) >= 2
    assert ends and max(e["id"] for e in reports) < min(e["id"] for e in ends)


def test_the_prepared_mark_is_stored_with_the_quarantine_phases_first_transaction(
    engine: MoveEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh move's PREPARED mark (its node held in quarantine from then on) is written in the
    transaction that reads the quarantine phase's desired state and bumps the epoch: one store
    commit from the claim to the first apply (it was two), durable (fsynced: it covers the claim's,
    which is not), and the mark is stored before any fabric changes (crash safety as before)."""
    from sqlalchemy import event

    from gpufabric.store.moves import prepared_ids

    engine.ledger.request("n1", _req("ta"))
    engine.run_pending()  # warm (the engine plans against its last verified state); n1 in ta: quarantine applies
    order: list[str] = []
    mine = threading.local()  # this test's own read, not counted
    event.listen(engine.store.engine, "commit", lambda conn: None if getattr(mine, "on", False) else order.append(f"commit {conn.info.get('synchronous', 'FULL')}"))
    real_claim, apply = engine.ledger.claim, engine.fabrics.apply

    def claim(*a: Any, **k: Any) -> Any:
        out = real_claim(*a, **k)
        order.append("claimed")
        return out

    def first(*a: Any, **k: Any) -> Any:
        if not any(x.startswith("apply") for x in order):
            mine.on = True
            with engine.store.tx() as tx:  # what a worker taking over after a kill -9 here would read
                stored = bool(prepared_ids(tx.session, [mid]))
            mine.on = False
            order.append(f"apply (prepared stored: {stored})")
        return apply(*a, **k)

    monkeypatch.setattr(engine.ledger, "claim", claim)
    monkeypatch.setattr(engine.fabrics, "apply", first)
    mid = engine.ledger.request("n1", _req("tb")).id
    assert mid is not None
    res = engine.run_pending()
    assert res is not None and res.moves[0].status is MoveStatus.DONE
    start = order.index("claimed") - 1  # the claim's own commit: not fsynced (the phase's commit covers it)
    at = next(i for i, x in enumerate(order) if x.startswith("apply"))
    assert order[start:at + 1] == ["commit NORMAL", "claimed", "commit FULL", "apply (prepared stored: True)"]
