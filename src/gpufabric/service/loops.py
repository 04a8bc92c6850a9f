"""The background loops of ``gpufabric serve`` — reconcile passes and the move worker —
that retry on errors (with backoff) instead of dying silently. Each loop records its last
successful pass and its errors for ``/metrics`` and ``/readyz``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from gpufabric.domain.moves import MoveStatus
from gpufabric.service.db_models import MoveEventRow, MoveRow
from gpufabric.service.store import Store

MAX_BACKOFF = 30.0


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

    def start(self, name: str, body: Callable[[], Any], interval: float) -> LoopState:
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
                    delay = interval
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


class MoveProgress:
    """Records a move engine's progress messages as move events of the moves its worker holds."""

    def __init__(self, store: Store, worker: str, on_record: Callable[[], None] = lambda: None) -> None:
        self.store = store
        self.worker = worker
        self.on_record = on_record  # e.g. wake the API's event streams

    def __call__(self, phase: str, message: str) -> None:
        self.record_running(phase, message)

    def record_running(self, phase: str, message: str, seconds: float | None = None) -> None:
        with self.store._tx() as s:
            ids = s.scalars(
                select(MoveRow.id).where(MoveRow.claimed_by == self.worker, MoveRow.status == MoveStatus.RUNNING.value)
            ).all()
            for i in ids:
                s.add(MoveEventRow(move_id=i, phase=phase[:16], message=message[:2000], seconds=seconds))
        self.on_record()

    def record(self, move_id: int, phase: str, message: str, seconds: float | None = None) -> None:
        with self.store._tx() as s:
            s.add(MoveEventRow(move_id=move_id, phase=phase[:16], message=message[:2000], seconds=seconds))
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
