"""Takeover benchmark (issue 23): a worker dies mid-move, another worker on the same
PostgreSQL store finishes the move; how long from the death to done, and was any node split.

Setup: one throwaway PostgreSQL cluster (:mod:`bench.pg`), the in-memory fabrics of
``tests/support/memfabric`` built by ``tests/support/workers`` (shared with the tests it mirrors: the
two engines, the device latency, the devices' owner map) (Ethernet switch, subnet manager, ``memory`` tags; 3 nodes) with a
fixed device latency of ``DEVICE_DELAY`` per apply (an OVSDB transaction or an SM reload takes
time; without it a phase is ~1 ms and "mid-move" means little). Each run: two MoveEngines with
worker ids naming two other hosts (``host-a<i>:4242:serve``, ``host-b<i>:4242:serve``, so the
"dead PID on this host" shortcut cannot apply), ``heartbeat_every=BEAT``, each on its own store
connection pool. ``a`` runs a move of ``n1`` (ta <-> tb, alternating); at a kill point it
dies as a ``kill -9``-ed process does: its heartbeat stops, its fabric-lock session ends
(``pg_terminate_backend``: the kernel closes a killed process's sockets), its thread is frozen (as
tests/functional/test_worker_takeover.py does; the memory fabric lives in this process, so a
``kill -9`` of a child is not possible; tests/functional/test_replica_takeover_netns.py kills real
``serve`` replicas). The move names that session (``moves.lock_session``), so ``b`` takes it over
one beat after a's last heartbeat (store/liveness.py); a host that hangs with its session open is
taken over after three (not measured here: b then waits for the lock until TCP keepalive).
The kill point alternates between the quarantine phase and the join phase (both just before
an apply). ``b`` ticks every ``TICK`` (``run_pending``), or sooner when a's move turns stale
(``MoveEngine.idle_wait``, as ``serve``'s worker loop does).

Measured per run: ``kill -> done`` (b's ``run_pending`` returns the move done) and
``kill -> claimed``; the bound is ``3 * BEAT + one phase``, where the phase is the longest
phase of b's own batch in the same run. Median of ``RUNS``. After each run ``a`` is woken up
and must touch nothing (fenced): its ``run_pending`` returns an empty batch.

An independent sampler thread reads the memory devices' own state every ``SAMPLE`` (the
switch's ports, the SM's P_Key tables, the tags: the drivers' ``observe``, not gpufabric's
Fabrics, planner or store), maps VLANs and P_Keys to tenants with the networks read once at
setup, and records every sample in which a node's ports belong to two different tenants
(quarantine excepted): a split. Target: no split, and every ratio <= 1.

Results: ``bench/results/takeover.json``. Run: ``python -m bench.bench_takeover``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpufabric.domain.models import QUARANTINE
from gpufabric.domain.moves import MoveRequest, MoveStatus
from gpufabric.engine.moves import BatchResult, MoveEngine
from gpufabric.store.core import Store

from bench.benchlab import loadavg
from bench.pg import postgres

RESULTS = Path(__file__).parent / "results" / "takeover.json"
TESTS = Path(__file__).resolve().parent.parent / "tests"
BEAT = 0.3  # heartbeat interval (s)
TICK = 0.1  # b's worker tick (s)
DEVICE_DELAY = 0.05  # s per device apply
SAMPLE = 0.002  # sampler period (s)
RUNS = 5
NODE = "n1"


def _support() -> Any:
    """tests/support/workers (the memory world, its devices' owner map, two engines on one store)."""
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    import support.workers as workers  # tests/ is put on the path just above

    return workers


class Sampler(threading.Thread):
    """Reads the devices directly; counts samples where a node is held by two tenants."""

    def __init__(self, devices: dict[str, Any], owner_of: Callable[[dict[str, Any]], dict[str, set[str]]]) -> None:
        super().__init__(daemon=True)
        self.devices, self.owner_of = devices, owner_of
        self.stop = threading.Event()
        self.samples = 0
        self.splits: list[dict[str, list[str]]] = []
        self.seen: set[tuple[str, ...]] = set()

    def run(self) -> None:
        while not self.stop.is_set():
            raw = {k: d.observe() for k, d in self.devices.items()}
            owners = self.owner_of(raw)
            self.samples += 1
            for node, ts in owners.items():
                tenants = sorted(ts - {QUARANTINE})
                self.seen.add((node, *sorted(ts)))
                if len(tenants) > 1:
                    self.splits.append({node: tenants})
            time.sleep(SAMPLE)


def takeover(a: MoveEngine, b: MoveEngine, to: str, kill_phase: str) -> dict[str, Any]:
    """One move of NODE to ``to`` started by ``a``, ``a`` killed before an apply of
    ``kill_phase``; ``b`` finishes it. Returns the timings."""
    m = a.ledger.request(NODE, MoveRequest(to, networks=(f"{to}-net",)))
    started, frozen, wake = threading.Event(), threading.Event(), threading.Event()
    died: list[float] = []

    def die(phase: str, message: str) -> None:
        started.set()  # a holds the move: b's worker starts ticking (a replica that was up before the death)
        if died or phase != kill_phase or ": applying" not in message:
            return
        _support().go_silent(a)  # no heartbeat, the lock's session terminated
        died.append(time.monotonic())
        frozen.set()
        wake.wait(120)

    a.progress = die
    out: list[BatchResult | None] = []
    ta = threading.Thread(target=lambda: out.append(a.run_pending()), daemon=True)
    ta.start()
    assert started.wait(60), "a never started the move"
    claimed: list[float] = []
    claim = b.ledger.claim

    def timed_claim(*args: Any, **kw: Any) -> Any:
        got = claim(*args, **kw)
        if got and not claimed:
            claimed.append(time.monotonic())
        return got

    b.ledger.claim = timed_claim  # type: ignore[method-assign]
    batch, t0 = None, time.monotonic()
    while batch is None:
        batch = b.run_pending()
        if batch is None:
            time.sleep(b.idle_wait(TICK))  # as serve's worker loop: wakes when a's move turns stale
        assert time.monotonic() - t0 < 60, "not taken over within 60 s"
    assert claimed and died and claimed[0] > died[0], "b claimed the move before a died"
    done = time.monotonic() - died[0]
    assert [(x.id, x.status) for x in batch.moves] == [(m.id, MoveStatus.DONE)], batch.moves
    got = b.ledger.get(m.id or 0)
    assert got.claimed_by == b.worker and got.attempts == 2, got
    wake.set()
    ta.join(60)
    assert not ta.is_alive() and out == [BatchResult([], [])], out  # fenced: a touched nothing
    phases = {t.phase: round(t.seconds, 3) for t in batch.timings}
    phase = max(t.seconds for t in batch.timings)
    bound = 3 * BEAT + phase
    return {"kill_phase": kill_phase, "to": to, "kill_to_claimed_s": round(claimed[0] - died[0], 3),
            "kill_to_done_s": round(done, 3), "claimed_to_done_s": round(done - (claimed[0] - died[0]), 3),
            "b_phases_total_s": round(sum(t.seconds for t in batch.timings), 3), "longest_phase_s": round(phase, 3), "bound_s": round(bound, 3),
            "ratio_to_bound": round(done / bound, 2), "b_phases": phases}  # fmt: skip


def run_takeover_bench(runs: int = RUNS) -> list[dict[str, Any]]:
    workers = _support()
    t0 = time.monotonic()
    with postgres() as url:
        fabrics = workers.memory_fabrics(DEVICE_DELAY)
        devices = workers.devices(fabrics)
        setup = Store.open(url=url)
        try:
            workers.seed(setup, fabrics)
            owner_of = workers.owner_map(setup)
        finally:
            setup.close()
        with workers.two_engines(url, fabrics, BEAT, "0") as (a, _b):  # n1 leased to ta first (untimed)
            a.ledger.request(NODE, MoveRequest("ta", networks=("ta-net",)))
            first = a.run_pending()
            assert first is not None and [x.status for x in first.moves] == [MoveStatus.DONE]
        assert owner_of({k: d.observe() for k, d in devices.items()})[NODE] == {"ta"}
        sampler = Sampler(devices, owner_of)
        sampler.start()
        rows, where = [], "ta"
        try:
            for i in range(1, runs + 1):
                where = "tb" if where == "ta" else "ta"
                with workers.two_engines(url, fabrics, BEAT, str(i)) as (a, b):
                    rows.append(takeover(a, b, where, ("join", "quarantine")[i % 2]))
                held = owner_of({k: d.observe() for k, d in devices.items()})[NODE]
                assert held == {where}, (i, held, rows, {k: d.observe() for k, d in devices.items()})
        finally:
            sampler.stop.set()
            sampler.join(10)
            fabrics.close()
    done = [r["kill_to_done_s"] for r in rows]
    bound = [r["bound_s"] for r in rows]
    summary = {"runs": runs, "heartbeat_s": BEAT, "tick_s": TICK, "device_delay_s": DEVICE_DELAY,
               "kill_to_done_median_s": round(statistics.median(done), 3),
               "kill_to_claimed_median_s": round(statistics.median(r["kill_to_claimed_s"] for r in rows), 3),
               "bound_median_s": round(statistics.median(bound), 3),
               "ratio_to_bound_median": round(statistics.median(r["ratio_to_bound"] for r in rows), 2),
               "ratio_to_bound_max": max(r["ratio_to_bound"] for r in rows), "target_ratio": 1.0,
               "sampler": {"samples": sampler.samples, "splits": len(sampler.splits), "first_splits": sampler.splits[:5],
                           "states_seen": sorted("/".join(s) for s in sampler.seen)},
               "seconds": round(time.monotonic() - t0, 1), "loadavg": loadavg(), "runs_detail": rows}  # fmt: skip
    assert sampler.samples > 100, sampler.samples
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": "takeover", "date": datetime.now(UTC).isoformat(timespec="seconds"), "cpus": os.cpu_count(),
           "rows": [summary]}  # fmt: skip
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    return [summary]


if __name__ == "__main__":
    for r in run_takeover_bench():
        print(json.dumps(r))
