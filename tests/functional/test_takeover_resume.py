"""A move taken over resumes from what the store records (issue 23, item 4): the taker does
not run the fabrics' preparation (``before_move``: gates, drains) again for a move the dead
worker already prepared, but it still re-reads the fabrics and applies what they lack."""

from __future__ import annotations

import time
from typing import Any

import pytest
from sqlalchemy import select

from gpufabric.domain.moves import MovePhase, MoveRequest, MoveStatus
from gpufabric.engine.moves import BatchResult, MoveEngine
from gpufabric.store.tables import MoveEventRow

from functional.test_worker_takeover import two  # noqa: F401  (the fixture)
from support.workers import freeze_before_apply
from unit.test_engine_memory import owners

pytestmark = pytest.mark.postgres


def test_a_move_taken_over_after_its_preparation_is_not_prepared_again(
    two: tuple[MoveEngine, MoveEngine],  # noqa: F811
) -> None:
    a, b = two
    m = a.ledger.request("n1", MoveRequest("ta", networks=("ta-net",)))
    ta = freeze_before_apply(a, "quarantine")  # prepared, before its quarantine apply: a's host goes silent
    assert a.ledger.get(m.id or 0).phase is MovePhase.QUARANTINE
    prepares: list[int] = []
    before_move = b.fabrics.before_move

    def counted(*args: Any, **kw: Any) -> None:
        prepares.append(1)
        before_move(*args, **kw)

    b.fabrics.before_move = counted  # type: ignore[method-assign]
    batch, t0 = None, time.monotonic()
    while batch is None:
        batch = b.run_pending()
        if batch is None:
            time.sleep(b.idle_wait(0.1))
        assert time.monotonic() - t0 < 30, "not taken over"
    assert [(x.id, x.status) for x in batch.moves] == [(m.id, MoveStatus.DONE)]
    assert prepares == []  # the dead worker's preparation is recorded: not run again
    phases = {t.phase: t for t in batch.timings}
    assert list(phases) == ["quarantine", "swap", "join"]
    assert phases["quarantine"].observed_first  # the fabrics re-read: a died before its quarantine apply
    assert phases["quarantine"].changes > 0 and phases["join"].changes > 0
    with b.store.tx() as tx:
        events = tx.session.scalars(select(MoveEventRow.phase).where(MoveEventRow.move_id == m.id)).all()
    assert list(events).count("prepared") == 1
    assert owners(b)["n1"] == {"ta"}
    assert ta.resume() == BatchResult([], [])
    assert owners(b)["n1"] == {"ta"}
