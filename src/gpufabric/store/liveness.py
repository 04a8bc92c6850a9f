"""Which running moves' workers stopped heartbeating, judged by this process's own clock.

A worker heartbeats the moves it holds every ``heartbeat_every`` seconds. Another replica, on
any host, watches those heartbeats: a running move whose heartbeat (with its claim) has not
changed for ``after`` seconds *of the watcher's monotonic clock* has a dead (or cut-off) worker,
and may be claimed (fencing as always: the old worker's next update raises ClaimLostError, and
the fabric lock keeps one writer on the fabrics). Comparing values seen, not timestamps, needs
no clock agreement between hosts. A watcher that has just started waits ``after`` seconds
before it judges a move it has never seen beat; replicas are expected to share one heartbeat
interval (``after`` is a multiple of it).
"""

from __future__ import annotations

import threading
import time
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpufabric.domain.moves import MoveStatus
from gpufabric.store.tables import MoveRow

Beat = tuple[str | None, datetime | None]  # (claimed_by, last heartbeat or claim time)


class HeartbeatWatch:
    """Remembers, per running move, its last heartbeat seen and since when (monotonic)."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[Beat, float]] = {}
        self._lock = threading.Lock()

    def stalled(self, s: Session, after: float, exclude: str = "") -> dict[int, Beat]:
        """Running moves (not held by ``exclude``) whose heartbeat has not changed for ``after``
        seconds of this watcher's clock, with the beat seen (a claim checks it is unchanged)."""
        rows = s.execute(
            select(MoveRow.id, MoveRow.claimed_by, func.coalesce(MoveRow.heartbeat_at, MoveRow.claimed_at)).where(
                MoveRow.status == MoveStatus.RUNNING.value
            )
        ).all()
        now = time.monotonic()
        out: dict[int, Beat] = {}
        with self._lock:
            seen: dict[int, tuple[Beat, float]] = {}
            for move_id, by, beat in rows:
                key: Beat = (by, beat)
                prev = self._seen.get(move_id)
                since = prev[1] if prev is not None and prev[0] == key else now
                seen[move_id] = (key, since)
                if by != exclude and now - since >= after:
                    out[move_id] = key
            self._seen = seen
        return out

    def forget(self, move_id: int) -> None:
        with self._lock:
            self._seen.pop(move_id, None)


def stalled_rows(s: Session, watch: HeartbeatWatch, after: float, worker: str, taken: set[int], room: int) -> list[MoveRow]:
    """Running moves whose heartbeat ``watch`` has seen unchanged for ``after`` s, locked (SKIP
    LOCKED) and still showing that same heartbeat and claim (else their worker lives)."""
    beats = {i: b for i, b in watch.stalled(s, after, exclude=worker).items() if i not in taken}
    if not beats:
        return []
    q = select(MoveRow).where(MoveRow.id.in_(beats)).order_by(MoveRow.id).with_for_update(skip_locked=True)
    out: list[MoveRow] = []
    for r in s.scalars(q):
        same = (r.claimed_by, r.heartbeat_at or r.claimed_at) == beats[r.id]
        if len(out) < room and r.status == MoveStatus.RUNNING.value and same:
            out.append(r)
            watch.forget(r.id)
    return out
