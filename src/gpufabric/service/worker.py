"""The warm worker that ``gpufabric serve`` runs: every tick it releases nodes whose lease has
ended (a lease's end is a scheduled release, enforced on time), runs pending moves as one
coalesced batch with a long-lived :class:`MoveEngine` (its last verified state saves a read of
every fabric per phase), and every ``reconcile_every`` seconds runs a reconcile pass.

Errors never kill the loop: each is counted and kept (``last_error``) for ``/metrics`` and
``/readyz``, and the loop goes on at the next tick.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gpufabric.service.moves import BatchResult, MoveEngine
from gpufabric.service.reconcile import Policy, ReconcileResult, reconcile_once
from gpufabric.service.tenancy import Principal, Tenancy

WORKER = Principal("worker", "admin")


@dataclass
class WorkerStats:
    ticks: int = 0
    moves_done: int = 0
    releases: int = 0
    reconciles: int = 0
    errors: int = 0
    last_error: str = ""
    last_tick_at: datetime | None = None
    last_reconcile_at: datetime | None = None
    last_ok_at: datetime | None = None
    recent: list[str] = field(default_factory=list)  # last few errors


class Worker:
    def __init__(
        self,
        engine: MoveEngine,
        tick: float = 0.5,
        window: float = 0.05,
        reconcile_every: float = 30.0,
        policy: Policy = Policy.REPAIR,
        on_reconcile: Callable[[ReconcileResult], None] | None = None,
        on_batch: Callable[[BatchResult], None] | None = None,
    ) -> None:
        self.engine = engine
        self.tenancy = Tenancy(engine.store)
        self.tick_seconds = tick
        self.window = window
        self.reconcile_every = reconcile_every
        self.policy = policy
        self.on_reconcile = on_reconcile
        self.on_batch = on_batch
        self.stats = WorkerStats()
        self._next_reconcile = 0.0 if reconcile_every > 0 else float("inf")

    def tick(self) -> BatchResult | None:
        """One pass: releases due, pending moves, and a reconcile pass when one is due."""
        s = self.stats
        s.ticks += 1
        s.last_tick_at = datetime.now(UTC)
        batch: BatchResult | None = None
        try:
            s.releases += len(self.tenancy.release_expired(WORKER))
            batch = self.engine.run_pending(window=self.window)
            if batch is not None:
                s.moves_done += sum(1 for m in batch.moves if m.finished)
                if self.on_batch:
                    self.on_batch(batch)
            if time.monotonic() >= self._next_reconcile:
                self._next_reconcile = time.monotonic() + self.reconcile_every
                result = reconcile_once(self.engine, self.policy, resume_moves=False)
                s.reconciles += 1
                s.last_reconcile_at = datetime.now(UTC)
                if self.on_reconcile:
                    self.on_reconcile(result)
            s.last_ok_at = datetime.now(UTC)
        except Exception as e:  # the loop reports and goes on (visible in /metrics and /readyz)
            s.errors += 1
            s.last_error = f"{type(e).__name__}: {e}"
            s.recent = [*s.recent[-9:], s.last_error]
        return batch

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            t0 = time.monotonic()
            batch = self.tick()
            if batch is None:  # idle: wait a tick; busy: go straight on
                stop.wait(max(0.0, self.tick_seconds - (time.monotonic() - t0)))

    def start(self, stop: threading.Event) -> threading.Thread:
        t = threading.Thread(target=self.run, args=(stop,), name="gpufabric-worker", daemon=True)
        t.start()
        return t
