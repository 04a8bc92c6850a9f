"""Two workers on one PostgreSQL store (issue 23, item 4): a move whose worker stopped
heartbeating on another host is taken over by the other worker within 3 heartbeat intervals,
not after the 120 s stale timeout — after one when PostgreSQL saw the worker's fabric-lock
session end (``kill -9``); fencing as always (the frozen worker, woken up, touches
nothing: its claim and its fabric lock are gone). The worker ids name two other hosts, so the
"dead process on this host" shortcut cannot apply."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import PgCluster
from gpufabric.domain.moves import MoveRequest, MoveStatus
from gpufabric.engine.moves import BatchResult, MoveEngine

from support.workers import end_sessions, freeze_before_apply, go_silent, memory_fabrics, seed, two_engines
from unit.test_engine_memory import owners

pytestmark = pytest.mark.postgres
BEAT = 0.3


@pytest.fixture
def two(postgres_cluster: PgCluster) -> Iterator[tuple[MoveEngine, MoveEngine]]:
    name = f"takeover{os.getpid()}_{time.monotonic_ns() % 10**9}"
    with postgres_cluster.admin() as c:
        c.execute(f'CREATE DATABASE "{name}"')
    fabrics = memory_fabrics()
    with two_engines(postgres_cluster.url(name), fabrics, BEAT) as (a, b):
        seed(a.store, fabrics)
        yield a, b
    fabrics.close()
    with postgres_cluster.admin() as c:
        c.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _timed_claims(b: MoveEngine) -> list[float]:
    """``time.monotonic()`` of b's first claim that took a move, once it happens."""
    claimed_at: list[float] = []
    claim = b.ledger.claim

    def timed_claim(*args: Any, **kw: Any) -> Any:
        got = claim(*args, **kw)
        if got and not claimed_at:
            claimed_at.append(time.monotonic())
        return got

    b.ledger.claim = timed_claim  # type: ignore[method-assign]
    return claimed_at


def _tick_until_done(b: MoveEngine, since: float) -> BatchResult:
    batch = None
    while batch is None:  # b's worker ticks (serve: every 0.5 s) with the default 120 s stale timeout
        batch = b.run_pending()
        if batch is None:
            time.sleep(0.1)
        assert time.monotonic() - since < 30, "not taken over"
    return batch


def test_a_killed_worker_loses_its_moves_after_one_missed_beat(two: tuple[MoveEngine, MoveEngine]) -> None:
    """kill -9 on another host: its heartbeat stops and PostgreSQL sees its fabric-lock session
    end, so b takes the move over one beat after a's last heartbeat, not three."""
    a, b = two
    m = a.ledger.request("n1", MoveRequest("ta", networks=("ta-net",)))
    claimed_at = _timed_claims(b)
    ta = freeze_before_apply(a, "join", "add: applying")  # before a's join apply: a is killed
    batch = _tick_until_done(b, ta.died_at)
    taken = claimed_at[0] - ta.died_at
    print(f"\nclaimed by b {taken:.2f}s after a was killed (1 beat = {BEAT:.1f}s, 3 beats = {3 * BEAT:.1f}s)")
    assert [(x.id, x.status) for x in batch.moves] == [(m.id, MoveStatus.DONE)]
    assert taken < 2 * BEAT  # the three-beat rule could not have fired before 2 beats (the last one up to one before)
    got = b.ledger.get(m.id or 0)
    assert (got.claimed_by, got.attempts) == (b.worker, 2)
    assert owners(b)["n1"] == {"ta"}
    assert ta.resume() == BatchResult([], [])  # a wakes up: its claim and its lock are gone, it must touch nothing
    assert b.ledger.get(m.id or 0) == got and owners(b)["n1"] == {"ta"}


def test_a_silent_worker_whose_session_lives_loses_its_moves_within_three_beats(
    two: tuple[MoveEngine, MoveEngine],
) -> None:
    """A paused host: no heartbeat, but its PostgreSQL session (and so the fabric lock) lives on
    until TCP keepalive ends it. b claims the move after three beats, then waits for the fabric
    lock; once the session ends, b finishes the move."""
    a, b = two
    m = a.ledger.request("n1", MoveRequest("tb", networks=("tb-net",)))
    claimed_at = _timed_claims(b)
    ta = freeze_before_apply(a, "join", "add: applying", sessions_end=False)
    out: list[BatchResult] = []
    tb = threading.Thread(target=lambda: out.append(_tick_until_done(b, ta.died_at)), daemon=True)
    tb.start()
    deadline = time.monotonic() + 30
    while not claimed_at:
        assert time.monotonic() < deadline, "b never claimed the move"
        time.sleep(0.02)
    taken = claimed_at[0] - ta.died_at
    time.sleep(2 * BEAT)
    assert tb.is_alive() and not out  # claimed, but the fabric lock is still a's: b waits, applies nothing
    assert b.ledger.get(m.id or 0).claimed_by == b.worker
    end_sessions(a)  # TCP keepalive ends the paused host's session
    tb.join(30)
    print(f"\nclaimed by b {taken:.2f}s after a went silent (3 beats = {3 * BEAT:.1f}s)")
    assert 2 * BEAT <= taken <= 3 * BEAT + 0.5  # three beats (the last one up to one before), plus one tick of b
    assert [(x.id, x.status) for x in out[0].moves] == [(m.id, MoveStatus.DONE)]
    assert owners(b)["n1"] == {"tb"}
    assert ta.resume() == BatchResult([], [])  # fenced
    assert owners(b)["n1"] == {"tb"}


def test_a_live_worker_keeps_its_moves(two: tuple[MoveEngine, MoveEngine]) -> None:
    a, b = two
    a.ledger.request("n2", MoveRequest("tb", networks=("tb-net",)))
    slow = threading.Event()

    def hold(phase: str, message: str) -> None:  # a is slow (10 beats) but alive: it heartbeats all along
        if phase == "join" and message.startswith("add: applying") and not slow.is_set():
            slow.set()
            time.sleep(10 * BEAT)

    a.progress = hold
    ta = threading.Thread(target=a.run_pending, daemon=True)
    ta.start()
    assert slow.wait(30)
    seen = []
    for _ in range(int(8 * BEAT / 0.1)):  # b ticks through 8 beats of a's slow phase
        seen.append(b.run_pending())
        time.sleep(0.1)
    assert seen == [None] * len(seen)
    ta.join(30)
    assert [(x.node, x.status, x.claimed_by, x.attempts) for x in a.ledger.moves()] == [
        ("n2", MoveStatus.DONE, a.worker, 1)]  # fmt: skip


def test_an_idle_worker_wakes_when_the_move_turns_stale_not_at_its_next_tick(two: tuple[MoveEngine, MoveEngine]) -> None:
    """b's tick (2 s) is longer than the 3 beats: it waits ``idle_wait`` instead, and claims the
    move within 3 beats of a's last heartbeat, not at its next tick."""
    a, b = two
    a.ledger.request("n3", MoveRequest("tb", networks=("tb-net",)))
    started, frozen, wake = threading.Event(), threading.Event(), threading.Event()
    died_at: list[float] = []

    def freeze(phase: str, message: str) -> None:
        started.set()  # a holds the move
        if died_at or phase != "join" or ": applying" not in message:
            return
        go_silent(a)
        died_at.append(time.monotonic())
        frozen.set()
        wake.wait(60)

    a.progress = freeze
    ta = threading.Thread(target=a.run_pending, daemon=True)
    ta.start()
    assert started.wait(30)
    assert b.run_pending() is None  # b sees a's move running (a replica that was up before)
    assert frozen.wait(30)
    waits, batch = [], None
    while batch is None:
        batch = b.run_pending()
        if batch is None:
            waits.append(b.idle_wait(2.0))
            time.sleep(waits[-1])
        assert time.monotonic() - died_at[0] < 10, "not taken over"
    claimed = b.ledger.get(batch.moves[0].id or 0)
    taken = time.monotonic() - died_at[0] - sum(t.seconds for t in batch.timings)
    wake.set()
    ta.join(30)
    assert (claimed.status, claimed.claimed_by, claimed.attempts) == (MoveStatus.DONE, b.worker, 2)
    assert waits and max(waits) <= BEAT + 0.01 and min(waits) < 2.0, waits  # a's lock session is gone: one beat
    assert taken <= BEAT + 0.3, taken  # one beat of the last heartbeat (before the freeze), then the claim
    assert owners(b)["n3"] == {"tb"}
