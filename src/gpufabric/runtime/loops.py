"""The background loops of ``gpufabric serve`` — reconcile passes, the move worker and the
rogue-SM watch — that retry on errors (with backoff) instead of dying silently. Each loop
records its last successful pass and its errors for ``/metrics`` and ``/readyz``.

The watch (:class:`RogueWatch`, every :data:`WATCH_INTERVAL` s, independent of the reconcile
interval) asks every backend with the ``watch`` capability for one cheap pass (InfiniBand:
SMInfo of the trusted master + MasterSMLID of a sample of ports); when one suspects a rogue
SM it wakes the reconcile loop at once, whose pass detects and contains on a full read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gpufabric.store.core import Store
from gpufabric.store.moves import MoveLedger

MAX_BACKOFF = 30.0
WATCH_INTERVAL = 0.5  # seconds between rogue-SM watch passes
WATCH_COOLDOWN = 5.0  # the same suspicion wakes reconcile again only after this long


@dataclass
class LoopState:
    name: str
    passes: int = 0
    errors: int = 0
    last_success: float | None = None  # unix time
    last_error: str = ""
    thread: threading.Thread | None = None

    @property
    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "alive": self.alive,
            "passes": self.passes,
            "errors": self.errors,
            "last_success": None
            if self.last_success is None
            else datetime.fromtimestamp(self.last_success, UTC).isoformat(),
            "last_error": self.last_error,
        }


@dataclass
class Loops:
    """Named loops sharing one stop flag; ``wake(name)`` runs a loop's next pass at once."""

    stop: threading.Event = field(default_factory=threading.Event)
    states: dict[str, LoopState] = field(default_factory=dict)
    _wake: dict[str, threading.Event] = field(default_factory=dict)
    on_error: Callable[[str, Exception], None] = lambda _n, _e: None

    def start(
        self, name: str, body: Callable[[], Any], interval: float, wait: Callable[[float], float] | None = None
    ) -> LoopState:
        """Run ``body`` every ``interval`` s; ``wait(interval)``, when given, says how long to wait
        after a successful pass instead (e.g. the move worker: until a held move turns stale)."""
        st = LoopState(name)
        wake = threading.Event()
        self.states[name] = st
        self._wake[name] = wake

        def run() -> None:
            backoff = min(1.0, interval or 1.0)
            while not self.stop.is_set():
                try:
                    body()
                    st.passes += 1
                    st.last_success = time.time()
                    st.last_error = ""
                    backoff = min(1.0, interval or 1.0)
                    delay = interval if wait is None else wait(interval)
                except Exception as e:  # a loop never dies: count, remember, back off, retry
                    st.errors += 1
                    st.last_error = f"{type(e).__name__}: {e}"[:500]
                    self.on_error(name, e)
                    delay = backoff
                    backoff = min(backoff * 2, MAX_BACKOFF)
                wake.wait(delay)
                wake.clear()

        st.thread = threading.Thread(target=run, name=f"gpufabric-{name}", daemon=True)
        st.thread.start()
        return st

    def wake(self, name: str) -> None:
        ev = self._wake.get(name)
        if ev is not None:
            ev.set()

    def shutdown(self) -> None:
        self.stop.set()
        for ev in self._wake.values():
            ev.set()


class RogueWatch:
    """One watch pass over ``backends`` (the fabrics' backends): ``wake()`` (the reconcile
    loop's next pass, now) when any suspects an intruder - again for the same suspicion only
    after ``cooldown`` s, so a decoy a tenant keeps up does not turn reconcile into a busy loop."""

    def __init__(
        self,
        wake: Callable[[], None],
        cooldown: float = WATCH_COOLDOWN,
        on_suspect: Callable[[tuple[str, ...]], None] = lambda _f: None,
    ) -> None:
        self.wake = wake
        self.on_suspect = on_suspect  # e.g. one line on serve's stderr
        self.cooldown = cooldown
        self.last: tuple[str, ...] = ()
        self.last_wake = 0.0
        self.suspected_at: float | None = None  # monotonic time of the first pass that suspected (metrics, drills)
        self.wakes = 0

    def run(self, backends: Mapping[str, Any]) -> tuple[str, ...]:
        seen: list[str] = []
        for name, b in backends.items():
            if "watch" in getattr(b, "capabilities", ()):
                seen += [f"{name}: {s}" for s in b.watch()]
        now = time.monotonic()
        found = tuple(seen)
        if found and (found != self.last or now - self.last_wake >= self.cooldown):
            if self.suspected_at is None:
                self.suspected_at = now
            self.last_wake = now
            self.wakes += 1
            self.on_suspect(found)
            self.wake()
        if not found:
            self.suspected_at = None
        self.last = found
        return found


class MoveProgress:
    """Records a move engine's progress messages as move events of the moves its worker holds.

    A message (``progress(phase, message)``) is written by a writer thread, with those given
    meanwhile in one transaction: the engine does not wait for a commit before it applies (an
    event reports; a move's phases are its own transactions). :meth:`flush` waits until every
    message given so far is stored: the engine's ``settle``, called before a phase or a move's
    end is recorded, so a move's events come before its end. :meth:`record` (one move's event)
    is written at once, after them."""

    def __init__(self, store: Store, worker: str, on_record: Callable[[], None] = lambda: None) -> None:
        self.store = store
        self.worker = worker
        self.on_record = on_record  # e.g. wake the API's event streams
        self._queue: list[tuple[str, str, float | None]] = []
        self._writing = False
        self._cv = threading.Condition()
        self._writer: threading.Thread | None = None

    def __call__(self, phase: str, message: str) -> None:
        self.record_running(phase, message)

    def record_running(self, phase: str, message: str, seconds: float | None = None) -> None:
        with self._cv:
            self._queue.append((phase, message, seconds))
            self._cv.notify_all()
            if self._writer is None:
                self._writer = threading.Thread(target=self._write, name="move-progress", daemon=True)
                self._writer.start()

    def _write(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: bool(self._queue))
                batch, self._queue, self._writing = self._queue, [], True
            try:
                MoveLedger(self.store).record_running_many(self.worker, batch)
                self.on_record()
            except Exception:  # a report lost with the store: the move's phases are recorded apart
                continue
            finally:
                with self._cv:
                    self._writing = False
                    self._cv.notify_all()

    def flush(self, timeout: float = 30.0) -> None:
        """Wait (at most ``timeout`` s) until every message given so far is stored (or lost with the store)."""
        with self._cv:
            self._cv.wait_for(lambda: not self._queue and not self._writing, timeout)

    def record(self, move_id: int, phase: str, message: str, seconds: float | None = None) -> None:
        self.record_many([(move_id, phase, message, seconds)])

    def record_many(self, events: Sequence[tuple[int, str, str, float | None]]) -> None:
        """Events ``(move id, phase, message, seconds)`` of given moves, after the messages given so far (one transaction)."""
        self.flush()
        MoveLedger(self.store).record_events(events)
        self.on_record()


def loop_metrics(loops: Loops) -> str:
    """Prometheus text of each loop: passes, errors, last success time, alive."""
    out = [
        "# HELP gpufabric_loop_passes_total Successful passes of a serve loop",
        "# TYPE gpufabric_loop_passes_total counter",
        *(f'gpufabric_loop_passes_total{{loop="{n}"}} {s.passes}' for n, s in loops.states.items()),
        "# HELP gpufabric_loop_errors_total Failed passes of a serve loop (it retries)",
        "# TYPE gpufabric_loop_errors_total counter",
        *(f'gpufabric_loop_errors_total{{loop="{n}"}} {s.errors}' for n, s in loops.states.items()),
        "# HELP gpufabric_loop_last_success_timestamp_seconds Unix time of a loop's last successful pass",
        "# TYPE gpufabric_loop_last_success_timestamp_seconds gauge",
        *(
            f'gpufabric_loop_last_success_timestamp_seconds{{loop="{n}"}} {s.last_success or 0}'
            for n, s in loops.states.items()
        ),
        "# HELP gpufabric_loop_alive Whether a serve loop's thread runs",
        "# TYPE gpufabric_loop_alive gauge",
        *(f'gpufabric_loop_alive{{loop="{n}"}} {int(s.alive)}' for n, s in loops.states.items()),
    ]
    return "\n".join(out) + "\n"
