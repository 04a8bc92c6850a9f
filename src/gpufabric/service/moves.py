"""The move workflow: old tenant -> quarantine -> new tenant on every fabric, crash-safe.

A move is a durable intent in the store. A worker claims a batch of pending moves
(coalescing requests that arrived within a short window), then runs each phase for the
whole batch: one plan, one transaction per switch, one SM sweep, then a verification
that reads every fabric back. The phase is recorded only after it is verified, so a
crash (kill -9 anywhere) leaves the move at a phase that is simply run again: every port
is then in its old tenant, quarantine, or its new tenant — never two tenants.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gpufabric.domain.errors import GpufabricError, VerifyError
from gpufabric.domain.models import QUARANTINE, Lease, Network, Node
from gpufabric.domain.moves import Move, MovePhase
from gpufabric.domain.segments import SegmentConfig
from gpufabric.domain.state import FabricState
from gpufabric.domain.values import Guid
from gpufabric.planning.desired import DesiredState, derive_desired
from gpufabric.planning.plan import Plan, as_observed, plan
from gpufabric.service.fabrics import Fabrics
from gpufabric.service.store import Store
from gpufabric.service.store_moves import MoveLedger

Progress = Callable[[str, str], None]  # (phase, message)


@dataclass
class PhaseTiming:
    phase: str
    seconds: float
    applied: dict[str, float] = field(default_factory=dict)
    changes: int = 0
    plan: Plan | None = None  # what a converge phase applied
    observed: FabricState | None = None  # its last read of the fabrics (the verification)


@dataclass
class BatchResult:
    moves: list[Move]
    timings: list[PhaseTiming]

    @property
    def plans(self) -> dict[str, Plan]:
        return {t.phase: t.plan for t in self.timings if t.plan is not None}

    def to_dict(self) -> dict[str, object]:
        return {
            "moves": [
                {
                    "id": m.id,
                    "node": m.node,
                    "from": m.from_tenant,
                    "to": m.to_tenant,
                    "status": m.status.value,
                    "phase": m.phase.value,
                }
                for m in self.moves
            ],
            "phases": [
                {
                    "phase": t.phase,
                    "seconds": round(t.seconds, 4),
                    "changes": t.changes,
                    "devices": {k: round(v, 4) for k, v in t.applied.items()},
                }
                for t in self.timings
            ],
            "total_seconds": round(sum(t.seconds for t in self.timings), 4),
            "plans": {k: v.to_dict() for k, v in self.plans.items()},
        }


@dataclass(frozen=True)
class StoreView:
    """The store's inputs of the desired state, read once: nodes, active leases, networks,
    and the nodes that moves in flight hold in quarantine."""

    nodes: tuple[Node, ...]
    leases: tuple[Lease, ...]
    networks: tuple[Network, ...]
    held_in_quarantine: frozenset[str]

    def ib_guids(self) -> list[Guid]:
        return [p.port_guid for n in self.nodes for p in n.ib]


def checkpoint(name: str) -> None:
    """A named point where the crash tests may kill this process (``GPUFABRIC_KILL_AT=name``)."""
    if os.environ.get("GPUFABRIC_KILL_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


class MoveEngine:
    """Runs moves against the store and the fabrics. ``store`` is a service Store."""

    def __init__(
        self,
        store: Store,
        fabrics: Fabrics,
        cfg: SegmentConfig,
        worker: str = "",
        verify_timeout: float = 30.0,
        progress: Progress | None = None,
    ) -> None:
        self.store = store
        self.ledger = MoveLedger(store)
        self.fabrics = fabrics
        self.cfg = cfg
        self.worker = worker or f"{os.uname().nodename}:{os.getpid()}"
        self.verify_timeout = verify_timeout
        self.progress = progress or (lambda _p, _m: None)

    # ----------------------------------------------------------------- desired state
    def view(self) -> StoreView:
        """One read of what the desired state is derived from."""
        s = self.store
        held = frozenset(m.node for m in self.ledger.open_moves() if m.holds_node_in_quarantine())
        return StoreView(tuple(s.nodes()), tuple(s.leases(active_at=datetime.now(UTC))), tuple(s.networks()), held)

    def desired(self, view: StoreView | None = None, extra_quarantine: Sequence[str] = ()) -> DesiredState:
        v = view or self.view()
        overrides = {n: QUARANTINE for n in (*v.held_in_quarantine, *extra_quarantine)}
        return derive_desired(v.nodes, v.leases, v.networks, self.fabrics.sm_port_guids, overrides)

    # ----------------------------------------------------------------- one converge step
    def converge(self, label: str, observed: FabricState | None = None) -> PhaseTiming:
        """Apply desired state to the fabrics and verify it by reading them back, holding the
        fabric lock (one worker at a time computes, applies and verifies). ``observed`` may be
        a read-back just made (the previous phase's verification)."""
        with self.ledger.fabric_lock():
            return self._converge(label, observed)

    def _converge(self, label: str, observed: FabricState | None) -> PhaseTiming:
        t0 = time.monotonic()
        view = self.view()
        desired = self.desired(view)
        if observed is None:
            self.progress(label, "observing fabrics")
            observed = self.fabrics.observe()
        guids = view.ib_guids()
        p = plan(desired, observed, guids)
        applied: dict[str, float] = {}
        if not p.empty:
            self.progress(label, f"applying {len(p.ethernet)} ethernet + {len(p.ib)} infiniband changes")
            applied = self.fabrics.apply(p, on_done=lambda dev, sec: self.progress(label, f"{dev} done in {sec:.2f}s"))
            checkpoint(f"{label}:applied")
            self.progress(label, "verifying by reading the fabrics back")
            observed = self.verify(desired, guids)
        return PhaseTiming(label, time.monotonic() - t0, applied, len(p.ethernet) + len(p.ib), p, observed)

    def verify(self, desired: DesiredState, guids: Sequence[Guid]) -> FabricState:
        """Read every fabric back until it equals ``desired``; return that reading."""
        deadline = time.monotonic() + self.verify_timeout
        while True:
            seen = self.fabrics.observe()
            rest = plan(desired, seen, guids)
            if rest.empty:
                return seen
            if time.monotonic() > deadline:
                raise VerifyError(
                    f"fabrics still differ from desired after {self.verify_timeout}s: {rest.lines()[:3]}",
                    fabric="all",
                    remaining=len(rest.lines()),
                )
            time.sleep(0.2)

    def preview(self, node: str, to_tenant: str, networks: tuple[str, ...]) -> dict[str, Plan]:
        """The plans a move would apply, per phase, computed without changing anything."""
        self.store.node(node)  # NotFoundError before anything else
        view = self.view()
        guids = view.ib_guids()
        observed = self.fabrics.observe()
        first = self.desired(view, extra_quarantine=[node])
        leases = [x for x in view.leases if x.node != node]
        if to_tenant != QUARANTINE:
            leases.append(Lease(to_tenant, node, datetime.now(UTC), None, networks))
        second = derive_desired(view.nodes, leases, view.networks, self.fabrics.sm_port_guids, None)
        return {"quarantine": plan(first, observed, guids), "join": plan(second, as_observed(first, guids), guids)}

    # ----------------------------------------------------------------- moves
    def run_batch(self, moves: Sequence[Move]) -> BatchResult:
        """Run claimed moves through their remaining phases together."""
        s = self.ledger
        timings: list[PhaseTiming] = []
        batch = list(moves)
        read_back: FabricState | None = None  # the quarantine phase's verification, reused by join
        try:
            if any(m.phase is MovePhase.QUARANTINE for m in batch):
                timings.append(self.converge("quarantine"))
                read_back = timings[-1].observed
                checkpoint("quarantine:verified")
                batch = [s.set_phase(m, MovePhase.SWAP) if m.phase is MovePhase.QUARANTINE else m for m in batch]
            if any(m.phase is MovePhase.SWAP for m in batch):
                t0 = time.monotonic()
                batch = [s.swap_lease(m) if m.phase is MovePhase.SWAP else m for m in batch]
                timings.append(PhaseTiming("swap", time.monotonic() - t0))
                checkpoint("swap:committed")
            if any(m.phase is MovePhase.JOIN for m in batch):
                timings.append(self.converge("join", read_back))
                checkpoint("join:verified")
                batch = [s.set_phase(m, MovePhase.DONE) for m in batch]
        except GpufabricError as e:
            batch = [s.fail(m, e.message) for m in batch]
            raise
        return BatchResult(batch, timings)

    def run_pending(self, window: float = 0.0, limit: int = 64, stale_after: float = 120.0) -> BatchResult | None:
        """Claim pending (and crashed) moves, coalescing those that arrive within ``window``
        seconds, and run them as one batch. None when there was nothing to do."""
        if window:
            time.sleep(window)
        claimed = self.ledger.claim(self.worker, limit, stale_after)
        if not claimed:
            return None
        return self.run_batch(claimed)
