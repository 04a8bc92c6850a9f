"""Event streams of moves on a real HTTP server (uvicorn on 127.0.0.1): at most N open per
principal (429 naming the cap, the slot given back when a client goes away), every stream
ends at the server's timeout, and a stream nobody rings polls the store with backoff instead
of 5 times a second."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from gpufabric.api.limits import ApiLimits

from support.api_world import World, build_world
from support.live_api import live_api


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, str, int]]:
    w = build_world(tmp_path_factory.mktemp("streams"), nodes=4, leased=2)
    with live_api(w.ctx) as base:
        move = httpx.post(f"{base}/api/v1/moves", json={"node": "gpu-0003", "to_tenant": "beta"},
                          headers=w.headers("admin")).json()  # fmt: skip
        yield w, base, move["id"]  # pending for ever: no worker runs here
    w.store.close()


def _open(base: str, move_id: int, headers: dict[str, str]) -> tuple[httpx.Client, httpx.Response]:
    c = httpx.Client(timeout=30)
    r = c.send(c.build_request("GET", f"{base}/api/v1/moves/{move_id}/events", headers=headers), stream=True)
    return c, r


def _wait(pred: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not pred() and time.monotonic() < deadline:
        time.sleep(0.05)
    return bool(pred())


@pytest.mark.timeout(90)
def test_open_streams_are_capped_per_principal_and_slots_come_back(live: tuple[World, str, int]) -> None:
    w, base, move_id = live
    w.ctx.configure(ApiLimits(streams_per_principal=2))
    admin = w.headers("admin")
    with ExitStack() as stack:
        opened = []
        for _ in range(2):
            c, r = _open(base, move_id, admin)
            stack.callback(c.close)
            stack.callback(r.close)
            assert r.status_code == 200
            opened.append((c, r))
        third = httpx.get(f"{base}/api/v1/moves/{move_id}/events", headers=admin, timeout=10)
        assert third.status_code == 429, third.text
        err = third.json()["error"]
        assert err["field"] == "streams_per_principal" and err["value"] == 2
        assert err["message"].startswith("too many open event streams: at most 2 per principal")
        assert int(third.headers["retry-after"]) >= 1
        key = "admin::ops"
        assert w.ctx.stream_slots.count(key) == 2
        opened[0][1].close()
        opened[0][0].close()
        assert _wait(lambda: w.ctx.stream_slots.count(key) == 1), "a closed stream gives its slot back"
        c, r = _open(base, move_id, admin)
        stack.callback(c.close)
        stack.callback(r.close)
        assert r.status_code == 200
    assert _wait(lambda: w.ctx.stream_slots.count("admin::ops") == 0)


@pytest.mark.timeout(60)
def test_a_stream_of_a_move_that_does_not_end_ends_at_the_timeout(live: tuple[World, str, int]) -> None:
    w, base, move_id = live
    w.ctx.configure(ApiLimits(stream_timeout=2.0, stream_poll_min=0.1, stream_poll_max=0.4))
    t0 = time.monotonic()
    with httpx.stream("GET", f"{base}/api/v1/moves/{move_id}/events", headers=w.headers("admin"), timeout=20) as r:
        lines = list(r.iter_lines())
    took = time.monotonic() - t0
    assert 1.9 <= took < 6.0, took
    kinds = [x[7:] for x in lines if x.startswith("event: ")]
    assert kinds[0] == "move" and kinds[-1] == "timeout"
    assert '"timeout_s":2.0' in lines[lines.index("event: timeout") + 1]


@pytest.mark.timeout(60)
def test_a_stream_nobody_rings_polls_the_store_with_backoff(live: tuple[World, str, int]) -> None:
    """Polls at 0, 0.2, 0.6, 1.4, 3.0, 4.6, 6.0 s (doubling to the 1.6 s ceiling): 7 reads of the
    move in 6 s, where a fixed 0.2 s poll reads it 30 times."""
    w, base, move_id = live
    w.ctx.configure(ApiLimits(stream_timeout=6.0, stream_poll_min=0.2, stream_poll_max=1.6))
    reads: list[float] = []
    real = w.ctx.reader.move_progress  # the stream's one read a wake (and the 404 check's before it)

    def counted(*a: Any) -> Any:
        reads.append(time.monotonic())
        return real(*a)

    w.ctx.reader.move_progress = counted  # type: ignore[method-assign]
    try:
        with httpx.stream("GET", f"{base}/api/v1/moves/{move_id}/events", headers=w.headers("admin"), timeout=20) as r:
            assert r.status_code == 200
            list(r.iter_lines())
    finally:
        w.ctx.reader.move_progress = real  # type: ignore[method-assign]
    assert 5 <= len(reads) <= 8, len(reads)
    gaps = [b - a for a, b in itertools.pairwise(reads)]
    assert max(gaps) <= 1.6 + 0.5 and gaps[-2] >= 1.2, gaps  # backed off to the ceiling, never past it


def test_a_lessee_stream_of_another_tenants_move_is_404_and_takes_no_slot(live: tuple[World, str, int]) -> None:
    w, base, move_id = live
    w.ctx.configure(ApiLimits(streams_per_principal=1))
    r = httpx.get(f"{base}/api/v1/moves/{move_id}/events", headers=w.headers("lessee-alpha"), timeout=10)
    assert r.status_code == 404
    assert w.ctx.stream_slots.count("lessee:alpha:alpha-user") == 0
