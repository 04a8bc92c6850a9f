"""What a batch's run returns: each phase's timing, change count, plan and verified read-back
(:class:`PhaseTiming`), and the batch's moves with them (:class:`BatchResult`, its JSON document)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpufabric.domain.moves import Move
from gpufabric.domain.state import FabricState
from gpufabric.planning.plan import Plan


@dataclass
class PhaseTiming:
    phase: str
    seconds: float
    applied: dict[str, float] = field(default_factory=dict)
    changes: int = 0
    plan: Plan | None = None  # what a converge phase applied
    observed: FabricState | None = None  # the verified state after it
    observed_first: bool = False  # it had to read the fabrics before planning (cold or another writer)



@dataclass
class BatchResult:
    moves: list[Move]
    timings: list[PhaseTiming]

    @property
    def plans(self) -> dict[str, Plan]:
        return {t.phase: t.plan for t in self.timings if t.plan is not None}

    def to_dict(self) -> dict[str, object]:
        return {
            "moves": [_move_dict(m) for m in self.moves],
            "phases": [
                {
                    "phase": t.phase,
                    "seconds": round(t.seconds, 4),
                    "changes": t.changes,
                    "devices": {k: round(v, 4) for k, v in t.applied.items()},
                    "observed_first": t.observed_first,
                }
                for t in self.timings
            ],
            "total_seconds": round(sum(t.seconds for t in self.timings), 4),
            "plans": {k: v.to_dict() for k, v in self.plans.items()},
        }


def _move_dict(m: Move) -> dict[str, object]:
    return {"id": m.id, "node": m.node, "from": m.from_tenant, "to": m.to_tenant, "status": m.status.value,
            "phase": m.phase.value, "error": m.error}  # fmt: skip
