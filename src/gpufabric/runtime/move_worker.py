"""The move worker of ``gpufabric serve``: one pass of its loop.

A pass releases the leases whose end has come, runs the converge the API asked for, then
claims the queued moves and runs them as one batch (:meth:`MoveEngine.run_pending
<gpufabric.engine.moves.MoveEngine.run_pending>`): those requested together and all that
arrived while the previous batch ran; a lone move is claimed at once. Each move's end is
recorded as progress, in one transaction, once the streams following them were told of
their end. The loop (:class:`~gpufabric.runtime.loops.Loops`) runs a pass when
a request wakes it, and otherwise every tick.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported by serve's declaration (its --window default): nothing heavy at import
    from gpufabric.runtime.loops import MoveProgress
    from gpufabric.store.core import Store

DEFAULT_WINDOW = 0.05  # s: the wait before a claim while another replica's batch runs (serve --window)


@dataclass
class MoveWorker:
    """``engine()``: the worker's long-lived MoveEngine; ``take_converge()``: whether the API
    asked for a converge since the last pass (and clears the request)."""

    store: Store
    engine: Callable[[], Any]
    progress: MoveProgress
    window: float = DEFAULT_WINDOW
    take_converge: Callable[[], bool] = lambda: False

    def __call__(self) -> None:
        from gpufabric.workflow.tenancy import WORKER, TenantWorkflow

        e = self.engine()
        TenantWorkflow(self.store).release_expired(WORKER)  # a lease's end is a scheduled release, on time
        if self.take_converge():
            e.converge("api")
        t0 = time.monotonic()
        result = e.run_pending(window=self.window)
        if result is not None:  # each phase's timing was recorded with the move's end
            self.progress.on_record()  # the moves' end is stored: the streams following them read it now
            took = f"{time.monotonic() - t0:.2f}s"
            self.progress.record_many([(m.id, m.phase.value, f"move {m.status.value} in {took}", None) for m in result.moves])
