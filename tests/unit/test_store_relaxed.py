"""Store.tx(durable=False) on SQLite: its commit is not fsynced (synchronous=NORMAL for that
transaction only), every other transaction's is (FULL), on the same pooled connection; what
runs relaxed: a move's claim, its heartbeats and its progress reports, never its phases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event, text

from gpufabric.domain.moves import MoveRequest
from gpufabric.store.core import Store
from gpufabric.store.moves import MoveLedger

from support.workers import memory_fabrics, seed


def _level(store: Store, durable: bool) -> int:
    with store.tx(durable=durable) as tx:
        return int(tx.session.execute(text("PRAGMA synchronous")).scalar_one())


def test_a_relaxed_transaction_commits_at_normal_and_the_next_at_full(tmp_path: Path) -> None:
    store = Store.open(url=f"sqlite:///{tmp_path / 'g.db'}")
    try:
        assert [_level(store, d) for d in (True, False, True, False, False, True)] == [
            2,
            1,
            2,
            1,
            1,
            2,
        ]  # FULL=2, NORMAL=1
    finally:
        store.close()


def test_claims_heartbeats_and_reports_are_relaxed_requests_and_phases_durable(tmp_path: Path) -> None:
    from gpufabric.engine.moves import MoveEngine

    from unit.test_engine_memory import CFG

    f = memory_fabrics()
    store = Store.open(url=f"sqlite:///{tmp_path / 'g.db'}")
    seed(store, f)
    eng = MoveEngine(store, f, CFG, worker="test:1", heartbeat_every=60)
    levels: list[tuple[str, str]] = []
    ledger = MoveLedger(store)
    where = {"now": ""}

    def spy(name: str, fn: Any) -> Any:
        def wrapped(*a: Any, **k: Any) -> Any:
            where["now"] = name
            try:
                return fn(*a, **k)
            finally:
                where["now"] = ""

        return wrapped

    event.listen(
        store.engine, "commit", lambda conn: levels.append((where["now"], conn.info.get("synchronous", "FULL")))
    )
    for name in ("request", "claim", "heartbeat", "record_running_many", "set_phases"):
        setattr(eng.ledger, name, spy(name, getattr(eng.ledger, name)))
    try:
        eng.ledger.request("n1", MoveRequest("ta", "baremetal", ("ta-net",)))
        res = eng.run_pending()
        assert res is not None and res.moves[0].id is not None
        eng.ledger.heartbeat(list(res.moves), "test:1")
        eng.ledger.record_running_many("test:1", [("join", "a report", None)])
        ledger.record_events([(res.moves[0].id, "done", "move done in 0.1s", None)])
        got = dict(levels)
        assert got["request"] == "FULL" and got["set_phases"] == "FULL"
        assert got["claim"] == "NORMAL" and got["heartbeat"] == "NORMAL" and got["record_running_many"] == "NORMAL"
        assert levels[-1] == ("", "NORMAL")  # record_events
        phases = [level for name, level in levels[:-1] if name == ""]  # the engine's own: the phases' (and reads')
        assert phases and set(phases) == {"FULL"}
    finally:
        f.close()
        store.close()
