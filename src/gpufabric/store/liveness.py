"""Which running moves' workers stopped heartbeating, judged by this process's own clock.

A worker heartbeats the moves it holds every ``heartbeat_every`` seconds. Another replica, on
any host, watches those heartbeats: a running move whose heartbeat (with its claim) has not
changed for ``after`` seconds *of the watcher's monotonic clock* has a dead (or cut-off) worker,
and may be claimed (fencing as always: the old worker's next update raises ClaimLostError, and
the fabric lock keeps one writer on the fabrics). Comparing values seen, not timestamps, needs
no clock agreement between hosts (a new value is dated at its write, estimated from what this
watcher saw of that worker's values: :class:`HeartbeatWatch`). A watcher that has just started
waits ``after`` seconds before it judges a move it has never seen beat; replicas are expected to
share one heartbeat interval (``after`` is a multiple of it).

A move whose worker held the fabric lock for it names that lock's PostgreSQL session
(``moves.lock_session``, store/lock.py). When that session no longer holds the lock while the
move still runs, PostgreSQL saw the worker's connection end (``kill -9``: the kernel closes its
sockets; a dead host: once its TCP connection times out): the move is taken over after
``gone_after`` (one heartbeat interval of no new heartbeat, so a worker that is only
reconnecting, e.g. after a database restart, beats again first) instead of ``after``. The
lock's holder is read from ``pg_locks`` only when such a move is due, once per poll.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpufabric.domain.moves import MoveStatus
from gpufabric.store.tables import MoveRow

Beat = tuple[str | None, datetime | None]  # (claimed_by, last heartbeat or claim time)
Holders = Callable[[], set[int]]  # the sessions holding the fabric lock now (store/lock.py lock_holders)


class HeartbeatWatch:
    """Remembers, per running move, its last heartbeat seen and since when (monotonic).

    "Since when" is the watcher's best upper estimate of when that heartbeat was *written*, not
    when a poll first saw it (which lags by up to one poll): per worker, the smallest
    ``seen_at - beat`` over every heartbeat this watcher has seen of it is that host's clock offset
    plus the shortest lag (never less), so ``beat + offset`` is never before the true write; it is
    clamped between this watcher's previous poll (the value was not there yet) and now, so a clock
    step on the worker's host cannot make a move look older than that. A move seen for the first
    time counts from now. :meth:`due_in` says when the next move turns stale, for the worker's idle
    poll to wake then rather than a tick later.
    """

    def __init__(self) -> None:
        self._seen: dict[int, tuple[Beat, float]] = {}
        self._session: dict[int, int] = {}  # move -> the fabric-lock session it names (moves.lock_session)
        self._offset: dict[str, float] = {}  # worker -> min(seen_at - beat time) (s)
        self._polled: float | None = None  # monotonic time of the previous poll
        self._lock = threading.Lock()

    def _since(self, key: Beat, prev: tuple[Beat, float] | None, now: float) -> float:
        by, beat = key
        if prev is not None and prev[0] == key:
            return prev[1]
        if by is None or beat is None:
            return now
        sample = now - beat.timestamp()
        offset = self._offset[by] = min(self._offset.get(by, sample), sample)
        if prev is None or self._polled is None:
            return now  # never seen this move: judged from now (a watcher that just started waits)
        return min(now, max(self._polled, beat.timestamp() + offset))

    def stalled(
        self, s: Session, after: float, exclude: str = "", gone_after: float | None = None, holders: Holders | None = None
    ) -> dict[int, Beat]:
        """Running moves (not held by ``exclude``) whose heartbeat has not changed for ``after``
        seconds of this watcher's clock, or for ``gone_after`` when the fabric-lock session the
        move names is not among ``holders()`` any more, with the beat seen (a claim checks it is
        unchanged)."""
        rows = s.execute(
            select(
                MoveRow.id, MoveRow.claimed_by, func.coalesce(MoveRow.heartbeat_at, MoveRow.claimed_at),
                MoveRow.lock_session,
            ).where(MoveRow.status == MoveStatus.RUNNING.value)
        ).all()  # fmt: skip
        now = time.monotonic()
        out: dict[int, Beat] = {}
        gone: dict[int, tuple[Beat, int]] = {}  # due by gone_after if its session is gone
        with self._lock:
            seen: dict[int, tuple[Beat, float]] = {}
            for move_id, by, beat, session in rows:
                key: Beat = (by, beat)
                since = self._since(key, self._seen.get(move_id), now)
                seen[move_id] = (key, since)
                if by == exclude:
                    continue
                if now - since >= after:
                    out[move_id] = key
                elif session is not None and gone_after is not None and now - since >= gone_after:
                    gone[move_id] = (key, int(session))
            self._seen, self._polled = seen, now
            self._session = {int(r[0]): int(r[3]) for r in rows if r[3] is not None}
        if gone and holders is not None:
            live = holders()
            out.update({i: key for i, (key, session) in gone.items() if session not in live})
        return out

    def due_in(self, after: float, exclude: str = "", gone_after: float | None = None) -> float | None:
        """Seconds until the first running move seen (not held by ``exclude``) turns stale at
        ``after`` — or is due a look at its fabric-lock session at ``gone_after``, when it names
        one — (0 when one already is), None when none is watched."""
        with self._lock:
            due = [
                since + (gone_after if gone_after is not None and i in self._session else after)
                for i, ((by, _), since) in self._seen.items()
                if by != exclude
            ]
        return None if not due else max(0.0, min(due) - time.monotonic())

    def others_running(self, exclude: str) -> bool:
        """Whether the last poll saw a running move held by a worker other than ``exclude``."""
        with self._lock:
            return any(by != exclude for (by, _), _since in self._seen.values())

    def forget(self, move_id: int) -> None:
        with self._lock:
            self._seen.pop(move_id, None)
            self._session.pop(move_id, None)


def stalled_rows(
    s: Session, watch: HeartbeatWatch, after: float, worker: str, taken: set[int], room: int,
    gone_after: float | None = None, holders: Holders | None = None,
) -> list[MoveRow]:
    """Running moves whose heartbeat ``watch`` has seen unchanged for ``after`` s (``gone_after``
    s when their fabric-lock session is gone: :meth:`HeartbeatWatch.stalled`), locked (SKIP
    LOCKED) and still showing that same heartbeat and claim (else their worker lives)."""
    stalled = watch.stalled(s, after, exclude=worker, gone_after=gone_after, holders=holders)
    beats = {i: b for i, b in stalled.items() if i not in taken}
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
