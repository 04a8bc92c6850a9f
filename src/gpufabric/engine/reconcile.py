"""The reconcile loop: compare desired (from leases and moves) with what the fabrics
really hold, and repair the drift or only report it, by policy.

``gpufabric reconcile --once`` runs one pass (for cron); ``gpufabric serve`` runs passes
on an interval. A lease that ends (``lease end``, or its end passes) keeps its node with its
tenant in the desired state until the release move's ``before_move`` (the OpenShift cordon and
drain) has run and the move holds the node in quarantine (:mod:`gpufabric.store.view`): a pass,
repair or not, never quarantines a node ahead of its drain; it sees drift only where the fabrics
differ from that.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass

from gpufabric.domain.state import FabricState
from gpufabric.engine.moves import MoveEngine
from gpufabric.planning.desired import DesiredState
from gpufabric.planning.plan import Plan, plan
from gpufabric.store.view import StoreView


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
    observed: FabricState | None = None  # the pass's last read of the fabrics (None if moves ran after it)

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
    """One pass, on one read of the fabrics: rogue SMs first (while one is master the trusted
    SM cannot apply anything), then the drift; then pending and crashed moves (repair only)."""
    t0 = time.monotonic()
    with engine.ledger.lock.held():
        view = engine.view()
        desired = engine.desired(view)
        observed = engine.fabrics.observe()
        engine.adopt(observed)
        rogues, contained = _rogue_sms(engine, view, desired, observed, policy)
        if contained:
            observed = engine.fabrics.observe()
            engine.adopt(observed, wrote=True)
        drift = plan(engine.kinds, desired, observed)
        repaired = False
        if policy is Policy.REPAIR and not drift.empty:
            done = engine._converge("repair")
            observed = done.observed or observed
            repaired = True
    resumed = 0
    if resume_moves and policy is Policy.REPAIR:
        batch = engine.run_pending()
        resumed = len(batch.moves) if batch else 0
    return ReconcileResult(
        policy, drift, repaired, time.monotonic() - t0, resumed, rogues, contained, None if resumed else observed
    )


def _rogue_sms(
    engine: MoveEngine, view: StoreView, desired: DesiredState, observed: FabricState, policy: Policy
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Intruders every fabric with the ``contain`` capability sees (rogue SMs on InfiniBand);
    repair cuts them off (switch port disabled, trusted SM restarted with the intended layout,
    tables verified by SMP)."""
    findings: list[str] = []
    contained: list[str] = []
    for name, backend in engine.fabrics.backends.items():
        if "contain" not in backend.capabilities:
            continue
        kind = engine.fabrics.kinds[name]
        c = backend.contain(desired.tenancy, desired.get(name), observed.get(name, kind.empty_state()),
                            policy is Policy.REPAIR)  # fmt: skip
        findings += [f"{name}: {f}" for f in c.findings]  # which subnet: each instance is contained on its own
        contained += c.contained
    return tuple(findings), tuple(contained)
