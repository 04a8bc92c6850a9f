"""The engine's two reads of the fabrics: a move (``MoveEngine.known_state``) reads each backend's
``observe_for_moves`` (what only the audit needs left out), the audit and the reconcile pass read
the full ``observe``. Counted on the memory kind's backend of a real engine."""

from __future__ import annotations

from typing import Any

import pytest

from gpufabric.engine.audit_run import audit
from gpufabric.engine.moves import MoveEngine
from gpufabric.engine.reconcile import Policy, reconcile_once

from unit.test_engine_memory import engine, mem, move  # noqa: F401  (the fixture)


def test_a_move_reads_for_moves_and_the_audit_and_reconcile_read_everything(
    engine: MoveEngine, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    b = mem(engine)
    calls: list[str] = []
    read = type(b).observe  # the backend's own read, whichever of the two asked

    def observe() -> Any:
        calls.append("observe")
        return read(b)

    def observe_for_moves() -> Any:
        calls.append("for_moves")
        return read(b)

    monkeypatch.setattr(b, "observe", observe)
    monkeypatch.setattr(b, "observe_for_moves", observe_for_moves)
    move(engine, "n1", "ta")
    assert calls == ["for_moves"]  # one read before the first write; read-backs after that
    engine.forget()
    move(engine, "n1", "tb")
    assert calls == ["for_moves", "for_moves"]
    calls.clear()
    audit(engine)
    assert calls == ["observe"]
    calls.clear()
    reconcile_once(engine, Policy.REPORT, resume_moves=False)
    assert calls == ["observe"]
