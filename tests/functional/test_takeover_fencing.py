"""Fencing right before each fabric write (issue 23): a worker frozen just before an apply
(a paused VM, a stopped process) whose move was taken over and finished by another worker must
write nothing when it wakes up. Before the fix it applied the plan it had computed before the
freeze — its quarantine removal — after the other worker had finished the move, so the node
ended quarantined on every fabric while the store said it was leased (found by
bench/bench_takeover.py)."""

from __future__ import annotations

import time

import pytest

from gpufabric.domain.moves import MoveRequest, MoveStatus
from gpufabric.engine.moves import BatchResult, MoveEngine

from functional.test_worker_takeover import BEAT, two  # noqa: F401  (the fixture)
from support import drivers
from support.workers import freeze_before_apply
from unit.test_engine_memory import owners

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("phase", ["quarantine", "join"])
def test_a_worker_woken_after_its_move_was_taken_over_writes_nothing(
    two: tuple[MoveEngine, MoveEngine],  # noqa: F811
    phase: str,
) -> None:
    a, b = two
    a.ledger.request("n1", MoveRequest("ta", networks=("ta-net",)))
    assert [m.status for m in (a.run_pending() or BatchResult([], [])).moves] == [MoveStatus.DONE]
    m = a.ledger.request("n1", MoveRequest("tb", networks=("tb-net",)))  # ta -> tb: quarantine removes ta
    ta = freeze_before_apply(a, phase)  # just before a's first apply of `phase`
    batch, t0 = None, time.monotonic()
    while batch is None:
        batch = b.run_pending()
        time.sleep(0.1)
        assert time.monotonic() - t0 < 30 * BEAT, "not taken over"
    assert [(x.id, x.status) for x in batch.moves] == [(m.id, MoveStatus.DONE)]
    assert owners(b)["n1"] == {"tb"}
    applies = {k: d.applies for k, d in (("sw", drivers.switches(b.fabrics)["leaf1"]), ("sm", drivers.sm(b.fabrics)))}
    assert ta.resume() == BatchResult([], [])
    assert owners(b)["n1"] == {"tb"}  # before the fix (phase quarantine): {"quarantine"}
    assert {k: d.applies for k, d in (("sw", drivers.switches(b.fabrics)["leaf1"]), ("sm", drivers.sm(b.fabrics)))} == applies
