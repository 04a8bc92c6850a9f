"""HeartbeatWatch (issue 23 item 4): a heartbeat is dated when it was written (the writer's clock
offset learned from what this watcher saw, never earlier than the write, clamped to the previous
poll), not when a poll first saw it; ``due_in`` says when the next move turns stale, so an idle
worker's poll wakes then rather than a tick later; a move whose fabric-lock session no longer
holds the lock is stale after one beat, not three, and only then. Fake clock and session: no
store, no sleep."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from gpufabric.store import liveness
from gpufabric.store.liveness import HeartbeatWatch

AFTER = 0.9  # 3 beats of 0.3 s


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def monotonic(self) -> float:
        return self.t


class Rows:
    """A session whose one query answers the running moves set in ``rows``: (id, worker, beat)
    or (id, worker, beat, fabric-lock session)."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def execute(self, _q: Any) -> Any:
        rows = [r if len(r) == 4 else (*r, None) for r in self.rows]
        return type("R", (), {"all": lambda _self: list(rows)})()


def rows() -> Any:
    return Rows()


def at(wall: float) -> datetime:
    return datetime.fromtimestamp(wall, UTC)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock(100.0)
    monkeypatch.setattr(liveness, "time", c)
    return c


def test_a_new_beat_is_dated_when_it_was_written_not_when_first_seen(clock: Clock) -> None:
    w, s = HeartbeatWatch(), rows()
    s.rows = [(1, "host-a:1:serve", at(1000.0))]  # the writer's clock: 900 s ahead of this one (and a lag)
    clock.t = 100.0
    assert w.stalled(s, AFTER) == {}
    assert w.due_in(AFTER) == pytest.approx(AFTER)  # first sight: counted from now
    clock.t = 100.3
    w.stalled(s, AFTER)
    s.rows = [(1, "host-a:1:serve", at(1000.5))]  # written at 100.5 or later here, first seen at 100.6
    clock.t = 100.6
    assert w.stalled(s, AFTER) == {}
    assert w.due_in(AFTER) == pytest.approx(100.5 + AFTER - 100.6)  # dated 100.5, not 100.6
    clock.t = 101.39
    assert w.stalled(s, AFTER) == {}
    clock.t = 101.41  # 0.91 s after 100.5; the old watcher (counting from 100.6) waited to 101.5
    assert w.stalled(s, AFTER) == {1: ("host-a:1:serve", at(1000.5))}
    assert w.due_in(AFTER) == 0.0
    assert w.due_in(AFTER, exclude="host-a:1:serve") is None


def test_a_clock_step_back_on_the_writer_counts_from_the_previous_poll_at_most(clock: Clock) -> None:
    w, s = HeartbeatWatch(), rows()
    s.rows = [(7, "host-b:2:serve", at(5000.0))]
    w.stalled(s, AFTER)
    clock.t = 100.3
    w.stalled(s, AFTER)
    s.rows = [(7, "host-b:2:serve", at(4000.0))]  # its clock stepped back 1000 s
    clock.t = 100.6
    assert w.stalled(s, AFTER) == {}  # not "1000 s old"
    assert w.due_in(AFTER) == pytest.approx(100.3 + AFTER - 100.6)


def test_a_live_worker_is_never_stale_and_a_new_move_waits_a_full_interval(clock: Clock) -> None:
    w, s = HeartbeatWatch(), rows()
    for i in range(10):  # beats every 0.3 s (written 0.05 s before each poll): never stale
        s.rows = [(3, "host-c:3:serve", at(2000.0 + 0.3 * i))]
        clock.t = 100.05 + 0.3 * i
        assert w.stalled(s, AFTER) == {}
        assert 0.8 <= (w.due_in(AFTER) or 0) <= AFTER + 1e-9
    s.rows.append((4, "host-c:3:serve", at(1000.0)))  # an old beat, never seen before: counted from now
    clock.t += 0.3
    assert w.stalled(s, AFTER) == {}
    clock.t += AFTER + 0.01
    assert sorted(w.stalled(s, AFTER)) == [3, 4]


BEAT = 0.3


def test_a_move_whose_lock_session_is_gone_is_stale_after_one_beat(clock: Clock) -> None:
    w, s = HeartbeatWatch(), rows()
    asked: list[float] = []
    holders: set[int] = {4242}

    def live() -> set[int]:
        asked.append(clock.t)
        return set(holders)

    s.rows = [(5, "host-a:1:serve", at(3000.0), 4242)]  # a's lock session is backend 4242
    w.stalled(s, AFTER, gone_after=BEAT, holders=live)
    clock.t = 100.1
    assert w.stalled(s, AFTER, gone_after=BEAT, holders=live) == {}
    assert asked == []  # not due yet: pg_locks not read
    assert w.due_in(AFTER, gone_after=BEAT) == pytest.approx(100.0 + BEAT - 100.1)  # one beat, not three
    clock.t = 100.31
    assert w.stalled(s, AFTER, gone_after=BEAT, holders=live) == {}  # due, but 4242 still holds the lock: alive
    assert asked == [100.31]
    holders.clear()  # the session ended (kill -9: the kernel closed a's sockets)
    clock.t = 100.35
    assert w.stalled(s, AFTER, gone_after=BEAT, holders=live) == {5: ("host-a:1:serve", at(3000.0))}
    holders.add(777)  # another worker's session holds the lock now: 4242 is still gone
    assert w.stalled(s, AFTER, gone_after=BEAT, holders=live) == {5: ("host-a:1:serve", at(3000.0))}


def test_a_gone_session_with_a_fresh_heartbeat_or_without_gone_after_is_not_stale(clock: Clock) -> None:
    w, s = HeartbeatWatch(), rows()
    s.rows = [(6, "host-b:2:serve", at(3000.0), 99), (7, "host-c:3:serve", at(3000.0))]
    w.stalled(s, AFTER, gone_after=BEAT, holders=set)
    clock.t = 100.2
    s.rows = [(6, "host-b:2:serve", at(3000.2), 99), (7, "host-c:3:serve", at(3000.0))]  # b beats again (reconnected)
    clock.t = 100.4
    assert w.stalled(s, AFTER, gone_after=BEAT, holders=set) == {}  # 6: 0.2 s since its beat; 7: names no session
    clock.t = 100.55
    assert w.stalled(s, AFTER, holders=set) == {}  # without gone_after (SQLite, an older caller): three beats
    assert w.due_in(AFTER) == pytest.approx(100.0 + AFTER - 100.55)
    clock.t = 100.6
    assert w.stalled(s, AFTER, gone_after=BEAT, holders=set) == {6: ("host-b:2:serve", at(3000.2))}
    clock.t = 100.91
    assert sorted(w.stalled(s, AFTER, gone_after=BEAT, holders=set)) == [6, 7]  # 7 after three beats
