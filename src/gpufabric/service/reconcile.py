"""The reconcile loop: compare desired (from leases and moves) with what the fabrics
really hold, and repair the drift or only report it, by policy.

``gpufabric reconcile --once`` runs one pass (for cron); ``gpufabric serve`` runs passes
on an interval. Expired leases fall out of the desired state, so their nodes go to
quarantine on the next pass.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass

from gpufabric.fabrics.infiniband.opensm import OpenSMDriver
from gpufabric.fabrics.infiniband.rogue import RoguePolicy, contain_rogue_sms
from gpufabric.planning.plan import Plan, plan
from gpufabric.service.moves import MoveEngine


class Policy(enum.StrEnum):
    REPAIR = "repair"
    REPORT = "report"


@dataclass(frozen=True)
class ReconcileResult:
    policy: Policy
    drift: Plan
    repaired: bool
    seconds: float
    moves_resumed: int = 0
    rogue_sms: tuple[str, ...] = ()  # findings, one line each
    rogue_contained: tuple[str, ...] = ()  # GUIDs whose switch port was disabled

    def to_dict(self) -> dict[str, object]:
        return {
            "policy": self.policy.value,
            "drift": self.drift.to_dict(),
            "drift_count": len(self.drift.lines()),
            "repaired": self.repaired,
            "seconds": round(self.seconds, 4),
            "rogue_sms": list(self.rogue_sms),
            "rogue_contained": list(self.rogue_contained),
            "moves_resumed": self.moves_resumed,
        }


def reconcile_once(engine: MoveEngine, policy: Policy, resume_moves: bool = True) -> ReconcileResult:
    t0 = time.monotonic()
    rogues, contained = _rogue_sms(engine, policy)
    resumed = 0
    if resume_moves and policy is Policy.REPAIR:
        batch = engine.run_pending()
        resumed = len(batch.moves) if batch else 0
    with engine.ledger.fabric_lock():
        view = engine.view()
        desired = engine.desired(view)
        guids = view.ib_guids()
        drift = plan(desired, engine.fabrics.observe(), guids)
        repaired = False
        if policy is Policy.REPAIR and not drift.empty:
            engine.fabrics.apply(drift)
            engine.verify(desired, guids)
            repaired = True
    return ReconcileResult(policy, drift, repaired, time.monotonic() - t0, resumed, rogues, contained)


def _rogue_sms(engine: MoveEngine, policy: Policy) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Rogue subnet managers first: while one is master the trusted SM cannot apply anything.
    Repair contains them (switch port disabled, trusted SM restarted, tables verified)."""
    sm = engine.fabrics.sm
    if not isinstance(sm, OpenSMDriver):
        return (), ()
    rogue_policy = RoguePolicy.CONTAIN if policy is Policy.REPAIR else RoguePolicy.ALERT
    report = contain_rogue_sms(sm, engine.desired().ib, rogue_policy)
    return tuple(str(f) for f in report.findings), tuple(str(g) for g in report.contained)
