"""Resuming a batch from its recorded phases (a takeover, or a batch the store dropped).

A move claimed again is run from the phase the store records, never from the start: the phases
already recorded are not re-run, and within the quarantine phase the fabrics' preparation
(``before_move``: gates, drains) is not repeated once the store records it (event ``prepared``):
the move already holds its node in quarantine, and a refusal at that point would claim that
nothing changed when the quarantine may already be applied. What is not skipped is the read-back:
the converge of every remaining phase re-reads the fabrics (the dead worker may have been
mid-apply) and applies only what they still lack, so a phase whose effect is already on the
fabrics costs one read and no change.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from gpufabric.domain.moves import Move, MovePhase
from gpufabric.store.moves import MoveLedger


def advance(batch: list[Move], at: Collection[MovePhase], step: Callable[[list[Move]], list[Move]]) -> list[Move]:
    """``step`` (one store transaction) for the moves of ``batch`` at a phase in ``at``; order kept."""
    done = iter(step([m for m in batch if m.phase in at]))
    return [next(done) if m.phase in at else m for m in batch]


def to_prepare(ledger: MoveLedger, batch: Sequence[Move]) -> list[Move]:
    """The moves of ``batch`` that still need ``before_move``: at phase quarantine and not yet
    recorded as prepared (a move taken over after its preparation is not prepared again)."""
    fresh = [m for m in batch if m.phase is MovePhase.QUARANTINE]
    if not fresh or all(m.attempts <= 1 for m in fresh):
        return fresh  # first claim of each: nothing can be recorded yet (no store read)
    done = ledger.prepared(fresh)
    return [m for m in fresh if m.id not in done]
