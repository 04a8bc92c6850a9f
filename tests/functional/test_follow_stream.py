"""``node move`` through ``--api`` follows the move's event stream and takes the move's detail from
it (every progress event, then the finished row): the same document ``GET /moves/{id}`` answers,
without that GET. A stream that ends before the move (the server's stream timeout) still falls
back to the GET. A real uvicorn on 127.0.0.1; the move is ended in the store as a worker would."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gpufabric.api.limits import ApiLimits
from gpufabric.cli.backends.remote import Remote
from gpufabric.cli.move_run import _follow
from gpufabric.domain.moves import MovePhase
from gpufabric.store import queries
from gpufabric.store.moves import MoveLedger

from support.api_world import World, build_world
from support.live_api import live_api


@pytest.fixture
def live(tmp_path: Any) -> Iterator[tuple[World, str]]:
    w = build_world(tmp_path, nodes=3, leased=0)
    w.ctx.configure(ApiLimits(stream_timeout=3.0, stream_poll_min=0.05, stream_poll_max=0.1))
    with live_api(w.ctx) as base:
        yield w, base
    w.store.close()


class Counting(Remote):
    def __init__(self, url: str, token: str) -> None:
        super().__init__(url, token)
        self.gets: list[str] = []

    def get(self, path: str, **params: Any) -> Any:
        self.gets.append(path)
        return super().get(path, **params)


def _run_move(w: World, move_id: int) -> None:
    """A worker's run of the move: claimed, its phases, done with the phase timings in the same
    transaction as the end (as engine/moves.py records them)."""
    time.sleep(0.3)  # the client is following by now
    ledger = MoveLedger(w.store)
    (m,) = ledger.claim("w:1")
    assert m.id == move_id
    m = ledger.set_phases([m], MovePhase.QUARANTINE, [("quarantine", "quarantining", None)])[0]
    m = ledger.set_phase(m, MovePhase.JOIN)
    ledger.set_phases([m], MovePhase.DONE, [("quarantine", "quarantined", 0.125), ("join", "joined", 0.25)])


def test_a_finished_move_s_detail_comes_from_its_stream(live: tuple[World, str]) -> None:
    w, base = live
    h = w.headers("admin")
    move = httpx.post(f"{base}/api/v1/moves", json={"node": "gpu-0001", "to_tenant": "beta"}, headers=h).json()
    worker = threading.Thread(target=_run_move, args=(w, move["id"]))
    worker.start()
    r = Counting(base, w.tokens["admin"])
    got = _follow(r, move["id"], json_out=True)
    worker.join(10)
    assert r.gets == []  # no GET of the move: the stream carried it
    assert got["status"] == "done" and got["timings"] == {"quarantine": 0.125, "join": 0.25}
    assert got == httpx.get(f"{base}/api/v1/moves/{move['id']}", headers=h).json()


def test_a_stream_that_ends_before_its_move_falls_back_to_the_get(live: tuple[World, str]) -> None:
    w, base = live
    move = httpx.post(f"{base}/api/v1/moves", json={"node": "gpu-0002", "to_tenant": "beta"},
                      headers=w.headers("admin")).json()  # fmt: skip
    r = Counting(base, w.tokens["admin"])
    got = _follow(r, move["id"], json_out=True)  # no worker: the stream times out after 3 s
    assert r.gets == [f"/moves/{move['id']}"] and got["status"] == "pending"


def test_the_timings_that_commit_with_the_end_between_the_stream_s_two_reads_are_sent(
    live: tuple[World, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream reads a move's new events, then its row. The worker's end commits the timings and
    the status together; here that commit falls between the two reads, on the first pass."""
    w, base = live
    h = w.headers("admin")
    move = httpx.post(f"{base}/api/v1/moves", json={"node": "gpu-0000", "to_tenant": "beta"}, headers=h).json()
    ledger = MoveLedger(w.store)
    (m,) = ledger.claim("w:1")
    m = ledger.set_phase(m, MovePhase.JOIN)
    events = queries._move_events
    calls: list[int] = []

    def read_then_finish(*a: Any, **kw: Any) -> Any:
        calls.append(1)  # 1: the 404 check before the stream; 2: the stream's first events read
        got = events(*a, **kw)
        if len(calls) == 2:  # after it, before the row read (Reader.move_progress)
            ledger.set_phases([m], MovePhase.DONE, [("quarantine", "quarantined", 0.125), ("join", "joined", 0.25)])
        return got

    monkeypatch.setattr(queries, "_move_events", read_then_finish)
    r = Counting(base, w.tokens["admin"])
    got = _follow(r, move["id"], json_out=True)
    assert r.gets == [] and got["status"] == "done"
    assert got["timings"] == {"quarantine": 0.125, "join": 0.25}
