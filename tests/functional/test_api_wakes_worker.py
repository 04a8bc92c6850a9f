"""A move requested through the API is claimed by this server's worker at once: the request
wakes the worker's loop (``ApiContext.changed`` -> ``Loops.wake("worker")``, as ``gpufabric
serve`` wires them), so its next pass runs without waiting for the poll interval, an hour here.
Only the wake can bring that pass: the test waits for it, it does not time it."""

from __future__ import annotations

import threading

from fastapi.testclient import TestClient

from gpufabric.api.app import create_app
from gpufabric.runtime.loops import Loops
from gpufabric.store.moves import MoveLedger

from support.api_world import World


def test_a_move_requested_through_the_api_wakes_the_worker_which_claims_it(world: tuple[World, TestClient]) -> None:
    w, _ = world
    ledger = MoveLedger(w.store)
    claimed: list[list[int | None]] = []
    passed = threading.Semaphore(0)

    def worker_pass() -> None:  # serve's pass, down to what this test looks at: the claim
        claimed.append([m.id for m in ledger.claim("serve:1")])
        passed.release()

    w.ctx.loops = loops = Loops()
    loops.start("worker", worker_pass, 3600.0)
    try:
        assert passed.acquire(timeout=60) and claimed == [[]]  # the first pass, at start: nothing queued
        with TestClient(create_app(w.ctx)) as client:
            one = client.post("/api/v1/moves", json={"node": "gpu-0003", "to_tenant": "beta"},
                              headers=w.headers("admin"))  # fmt: skip
            assert one.status_code == 202, one.text
            assert passed.acquire(timeout=60)  # woken by the request: the poll is an hour away
            assert claimed[1] == [one.json()["id"]]
            batch = client.post("/api/v1/moves/batch", json={"nodes": ["gpu-0004", "gpu-0005"], "to_tenant": "beta"},
                                headers=w.headers("admin"))  # fmt: skip
            assert batch.status_code == 202, batch.text
            assert passed.acquire(timeout=60)
            assert claimed[2] == [m["id"] for m in batch.json()["items"]]
    finally:
        loops.shutdown()
