"""The background side of ``gpufabric serve``: the move worker, the reconcile loop, the rogue-SM
watch and the leader's lock (reconcile and the watch: one replica at a time), over one long-lived
engine, and the metrics they give ``/metrics``. ``cli/serve_cmd.py`` reads the options, builds
the API around these (:meth:`ServerLoops.start` with its context) and serves it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gpufabric.engine.reconcile import Policy, reconcile_once
from gpufabric.runtime.loops import WATCH_INTERVAL, Loops, MoveProgress, RogueWatch, loop_metrics
from gpufabric.runtime.move_worker import DEFAULT_WINDOW, MoveWorker
from gpufabric.runtime.telemetry import Cached, Telemetry, fabric_metrics
from gpufabric.store.loop_leader import LoopLeader

if TYPE_CHECKING:
    from gpufabric.domain.segments import SegmentConfig
    from gpufabric.engine.moves import MoveEngine
    from gpufabric.store.core import Store

LEADER_BEAT = 1.0  # seconds between a standby's tries for the loops' lock (and the leader's check it holds it)


class Listener(Protocol):
    """What the loops tell the API (:class:`gpufabric.api.deps.ApiContext`) and ask of it."""

    converge_requested: bool  # the API asked for a converge (the worker's next pass runs it)
    last_reconcile: dict[str, Any] | None

    def ring(self) -> None: ...  # a move of this worker made progress: wake the event streams
    def set_audit(self, report: Any) -> None: ...  # the last reconcile pass's audit


class ServerLoops:
    """The loops of one serving replica over ``store`` and the fabrics of ``fabrics_file`` (no
    file: no worker, no loop). ``say``: a line for the operator (a loop's error, leadership)."""

    def __init__(self, store: Store, fabrics_file: Path, segment_config: Callable[[], SegmentConfig], policy: Policy,
                 interval: float, window: float = DEFAULT_WINDOW, poll: float = 0.5, heartbeat: float = 5.0,
                 say: Callable[[str], Any] = print) -> None:  # fmt: skip
        self.store, self.fabrics_file, self.segment_config = store, fabrics_file, segment_config
        self.policy, self.interval, self.window, self.poll, self.heartbeat, self.say = (
            policy, interval, window, poll, heartbeat, say)  # fmt: skip
        self.telemetry = Telemetry()
        self.loops = Loops(on_error=self._pass_failed)
        self.has_fabrics = fabrics_file.exists()
        self.worker_id = f"{os.uname().nodename}:{os.getpid()}:serve"
        self.progress = MoveProgress(store, self.worker_id)
        self.leader = LoopLeader(store)  # reconcile and the rogue-SM watch: one replica at a time
        self._fabric_series: Callable[[], str] = Cached(self._read_fabric_series) if self.has_fabrics else _no_series
        self._warm: MoveEngine | None = None

    def _pass_failed(self, name: str, e: Exception) -> None:
        """A loop's pass failed: one line for the operator; a reconcile pass (its audit included)
        counts in ``gpufabric_errors{kind}`` by the error's type."""
        self.say(f"{name} pass failed (will retry): {e}")
        if name == "reconcile":
            self.telemetry.record_error(e)

    def engine(self, **kw: Any) -> MoveEngine:
        """A new move engine over the store and the fabrics (the API's, for its own calls)."""
        from gpufabric.engine.fabrics import Fabrics
        from gpufabric.engine.moves import MoveEngine
        from gpufabric.store.registry import Registry

        cfg = self.segment_config()
        fabrics = Fabrics.load(self.fabrics_file, Registry.from_entry_points(), cfg)
        return MoveEngine(self.store, fabrics, cfg, **kw)

    def _read_fabric_series(self) -> str:
        e = self.engine()
        try:
            return fabric_metrics(e)
        finally:
            e.fabrics.close()

    def _leader_series(self) -> str:
        return f"# TYPE gpufabric_loops_leader gauge\ngpufabric_loops_leader {int(self.leader.held)}\n"

    def metrics(self) -> str:
        """The series of ``/metrics``: requests, the loops, the fabrics (cached) and leadership."""
        return self.telemetry.render() + loop_metrics(self.loops) + self._fabric_series() + self._leader_series()

    def warm(self) -> MoveEngine:
        """One long-lived engine for the worker and the reconcile loop: its last verified state
        spares a read of every fabric per phase (the fabric lock serialises the two)."""
        if self._warm is None:
            self._warm = self.engine(worker=self.worker_id, progress=self.progress, settle=self.progress.flush,
                                     heartbeat_every=self.heartbeat)  # fmt: skip
        return self._warm

    def start(self, api: Listener) -> None:
        """Start the loops (with fabrics): the worker, and with an interval the leader's beat, the
        reconcile loop and the rogue-SM watch. ``api`` hears this worker's progress at once."""
        self.progress.on_record = api.ring  # a follower's event stream hears this worker's progress at once
        loops, leader, warm = self.loops, self.leader, self.warm

        def take_converge() -> bool:
            asked, api.converge_requested = api.converge_requested, False
            return asked

        worker_pass = MoveWorker(self.store, warm, self.progress, self.window, take_converge)

        def reconcile_pass() -> None:
            if not leader.held:
                return  # a standby: the leader's loop repairs (see leader_pass)
            e = warm()
            result = reconcile_once(e, self.policy, resume_moves=False)
            self.telemetry.record_reconcile(result)
            report = self.telemetry.record_audit(e, result.observed)
            api.set_audit(report)
            api.last_reconcile = {"at": datetime.now(UTC).isoformat(), **result.to_dict()}

        def leader_pass() -> None:
            """Take the loops' lock when free (a standby replaces a dead leader within one beat)."""
            was = leader.held
            if leader.try_lead() and not was:
                self.say(f"{self.worker_id}: leads the reconcile loop and the rogue-SM watch")
                loops.wake("reconcile")

        if not self.has_fabrics:
            return
        loops.start("worker", worker_pass, self.poll, wait=lambda tick: warm().idle_wait(tick))
        if self.interval > 0:
            leader_pass()
            loops.start("leader", leader_pass, LEADER_BEAT)
            loops.start("reconcile", reconcile_pass, self.interval)
            watch = RogueWatch(  # rogue SMs in seconds, not at the next reconcile pass
                lambda: loops.wake("reconcile"),
                on_suspect=lambda f: self.say(f"sm-watch: {'; '.join(f)[:300]}: reconcile now"),
            )
            loops.start("sm-watch", lambda: watch.run(warm().fabrics.backends) if leader.held else (), WATCH_INTERVAL)

    def stop(self) -> None:
        """Stop the loops and give up the leader's lock (another replica takes over)."""
        self.loops.shutdown()
        self.leader.release()


def _no_series() -> str:
    return ""
