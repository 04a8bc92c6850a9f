"""Move benchmark on real fabrics (ibsim + OpenSM, OVS over OVSDB), warm engine.

For a fabric of 34 HCAs (34 nodes x 1 HCA) and of 1,000 HCAs (500 nodes x 2 HCAs)
(:mod:`bench.benchlab`), with 33 nodes leased to tenant ``alpha`` first:

* ``floor``: the same fabric work as the move that follows it — its quarantine plan and its
  join plan (two verified changes x 2 phases, the Ethernet and the IB change of each phase
  applied in parallel through ``Fabrics.apply``: one OVSDB transaction confirmed by ``cur_cfg``
  + read-back; one OpenSM reload verified by SMP reads of the changed ports), timed; then the
  way back, untimed. Excluded from the floor (and included in the move): reading the store,
  deriving the desired state, planning, the move ledger's writes, the fabric lock and epoch;
  nothing else.
* ``one move``: ``gpu-a01`` moved alpha -> beta (then beta -> alpha, alternating) through a
  long-lived MoveEngine (``ledger.request`` + ``run_pending``), timed from the request to
  done. Each run asserts that BOTH converge phases changed ports (quarantine removes the old
  tenant's VLAN and PKey, join adds the new one's).
* ``32 coalesced``: 32 nodes requested alpha -> beta together (one request of 32 nodes, one
  transaction, as ``gpufabric node move n1 ... n32`` and ``POST /moves/batch`` make it), one
  ``run_pending``; ``requests_s`` and ``worker_s`` (``run_pending``) are also given apart.
* Each figure is the median of ``RUNS`` runs, interleaved (floor, move, floor, move, ...);
  ``min_s`` and the min-to-min ratio are given too (the machine is shared: noisy).
* ``command``: ``gpufabric node move`` as a fresh process (cold: imports, first OVSDB
  connection, ibnetdiscover + full observe) vs the engine's own ``total_seconds`` it reports.
* ``served``: ``gpufabric node move`` through a warm ``gpufabric serve`` (see
  :func:`served_moves`), wall time vs the server engine's time for the move.

Targets: one move <= 1.5x floor; 32 coalesced <= 2x one move; served wall <= 2x engine. ``loadavg`` is recorded (the
machine is shared). Results: ``bench/results/moves.json``. Run: ``python -m bench.bench_moves``.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpufabric.domain.models import Lease
from gpufabric.domain.moves import MoveRequest
from gpufabric.engine.moves import BatchResult, MoveEngine
from gpufabric.lab.serve import serving
from gpufabric.planning.plan import merge, plan

from bench.benchlab import BenchFabric, loadavg, start

RESULTS = Path(__file__).parent / "results" / "moves.json"
SIZES = ((34, 1), (500, 2))  # (nodes, HCAs per node)
RUNS = 11
BATCH = 32


def floor(eng: MoveEngine, node: str, to: str) -> tuple[float, list[dict[str, int]]]:
    """The same fabric work as the move of ``node`` to ``to``, without the rest: its quarantine
    plan and its join plan applied through ``Fabrics.apply`` (each a verified change on
    Ethernet and IB in parallel), timed; then, untimed, the way back through quarantine (the
    fabrics end as the store says, so the timed move that follows does exactly this work)."""
    view = eng.view()
    state, _ = eng.known_state()
    held = eng.desired(view, extra_quarantine=[node])
    there = eng.desired(view, leases=[*(x for x in view.leases if x.node != node),
                                      Lease(to, node, datetime.now(UTC), None, (f"{to}-net",))])  # fmt: skip
    total, counts = 0.0, []
    for i, d in enumerate((held, there, held, eng.desired(view))):
        p = plan(eng.kinds, d, state)
        t0 = time.perf_counter()
        read_back, _ = eng.fabrics.apply(p)
        if i < 2:
            total += time.perf_counter() - t0
            counts.append(p.counts())
        state = merge(eng.kinds, state, read_back)
    return total, counts


def _changes(res: BatchResult) -> dict[str, dict[str, int]]:
    return {t.phase: (t.plan.counts() if t.plan else {}) for t in res.timings if t.phase in ("quarantine", "join")}


def one_move(eng: MoveEngine, node: str, to: str) -> tuple[float, BatchResult, float]:
    t0 = time.perf_counter()
    eng.ledger.request(node, MoveRequest(to, "baremetal", (f"{to}-net",)))
    t1 = time.perf_counter()
    res = eng.run_pending()
    seconds = time.perf_counter() - t0
    worker = time.perf_counter() - t1
    assert res is not None and all(m.finished for m in res.moves)
    ch = _changes(res)
    assert all(ch.get(p, {}).get(f, 0) > 0 for p in ("quarantine", "join") for f in ("ethernet", "infiniband")), ch
    return seconds, res, worker


def command_move(fab: BenchFabric, node: str, to: str) -> dict[str, Any]:
    exe = str(Path(sys.executable).parent / "gpufabric")
    env = {**os.environ, "GPUFABRIC_HOME": str(fab.home)}
    t0 = time.perf_counter()
    out = subprocess.run(
        [exe, "node", "move", node, "--to-tenant", to, "--network", f"{to}-net", "--json"],
        env=env, capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    doc = json.loads(out.stdout)
    engine_s = doc.get("total_seconds") if isinstance(doc, dict) else None
    return {"wall_s": round(wall, 3), "engine_s": engine_s, "ratio_wall_to_engine": round(wall / engine_s, 2) if engine_s else None}


def installed_env() -> dict[str, str]:
    """This environment, less ``PYTHONDONTWRITEBYTECODE``: a command runs as installed, its
    modules' bytecode cached (with it set, every run would compile the CLI's modules again)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def served_moves(fab: BenchFabric, node: str, where: str, runs: int = 5, serve_args: tuple[str, ...] = ()) -> dict[str, Any]:
    """``gpufabric node move`` through a warm ``gpufabric serve`` run with its default settings
    (its worker's coalescing window, its reconcile loop and rogue-SM watch: what a user gets;
    ``serve_args`` adds options): the command's wall time (a fresh process: interpreter +
    imports, POST, following the server-sent events, GET of the detail) vs the server engine's
    own time for that move (the sum of its recorded phase times), and the start of the same
    command against a refused port."""
    exe = str(Path(sys.executable).parent / "gpufabric")
    env = {**installed_env(), "GPUFABRIC_HOME": str(fab.home)}
    token = json.loads(subprocess.run([exe, "token", "create", "--role", "admin", "--name", "bench", "--json"], env=env,
                                      capture_output=True, text=True, check=True).stdout)["secret"]  # fmt: skip
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{sock.getsockname()[1]}"  # closed again: nothing listens there
    with serving(env, *serve_args) as srv:
        api = {**env, "GPUFABRIC_API": srv.base, "GPUFABRIC_TOKEN": token}
        walls, engines, starts = [], [], []
        for i in range(runs + 1):  # the first warms the server's engine (its first, cold observe)
            where = "beta" if where == "alpha" else "alpha"
            t0 = time.perf_counter()
            out = subprocess.run([exe, "node", "move", node, "--to-tenant", where, "--network", f"{where}-net", "--json"],
                                 env=api, capture_output=True, text=True, timeout=600, check=True)  # fmt: skip
            wall = time.perf_counter() - t0
            doc = json.loads(out.stdout)["moves"][0]  # the run's one move (domain/move_json.py)
            assert doc["status"] == "done", doc
            if i:
                walls.append(wall)
                engines.append(sum(doc["timings"].values()))
                t0 = time.perf_counter()  # the same command's start on the same path: argv read, imports, a
                subprocess.run([exe, "--api", refused, "node", "move", node, "--to-tenant", where, "--network",
                                f"{where}-net", "--json"], env=api, capture_output=True)  # refused connect  # fmt: skip
                starts.append(time.perf_counter() - t0)
    wall, eng = statistics.median(walls), statistics.median(engines)
    return {"runs": runs, "wall_s": round(wall, 3), "engine_s": round(eng, 3), "ratio_wall_to_engine": round(wall / eng, 2),
            "command_start_s": round(statistics.median(starts), 3),
            "wall_less_start_s": round(wall - statistics.median(starts), 3),
            "ratio_wall_less_start_to_engine": round((wall - statistics.median(starts)) / eng, 2),
            "target_ratio": 2.0, "where": where, "serve_args": list(serve_args) or "defaults"}  # fmt: skip


def bench_size(nodes: int, hcas: int, runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gf-bench-moves-") as tmp:
        fab = start(Path(tmp), nodes, hcas)
        eng = fab.engine()
        try:
            row: dict[str, Any] = {"hcas": nodes * hcas, "nodes": nodes, "setup_s": round(fab.setup_seconds, 1),
                                   "loadavg_start": loadavg()}  # fmt: skip
            for t in ("alpha", "beta"):
                eng.store.create_tenant(t)
                eng.store.create_network(f"{t}-net", t, eng.cfg, eng.kinds)
            names = [n.name for n in fab.nodes]
            movers = names[: BATCH + 1]
            t0 = time.perf_counter()
            for n in movers:
                eng.ledger.request(n, MoveRequest("alpha", "baremetal", ("alpha-net",)))
            eng.run_pending(limit=64)
            row["cold_first_batch_s"] = round(time.perf_counter() - t0, 3)
            floors, singles, workers, phases = [], [], [], []
            where = "alpha"
            for _ in range(runs):
                where = "beta" if where == "alpha" else "alpha"
                f, fcounts = floor(eng, movers[0], where)
                floors.append(f)
                s, res, w = one_move(eng, movers[0], where)
                singles.append(s)
                workers.append(w)
                phases.append({t.phase: round(t.seconds, 3) for t in res.timings})
            fl, one = statistics.median(floors), statistics.median(singles)
            row["floor"] = {"median_s": round(fl, 3), "min_s": round(min(floors), 3),
                            "runs": [round(x, 3) for x in floors], "changes": fcounts}  # fmt: skip
            row["one_move"] = {"median_s": round(one, 3), "min_s": round(min(singles), 3),
                               "runs": [round(x, 3) for x in singles],
                               "worker_median_s": round(statistics.median(workers), 3),
                               "phases": phases[-1], "changes": _changes(res),
                               "ratio_to_floor": round(one / fl, 2), "ratio_min_to_min": round(min(singles) / min(floors), 2),
                               "target_ratio": 1.5}  # fmt: skip
            t0 = time.perf_counter()  # one request of 32 nodes (`gpufabric node move n1 ... n32`): one transaction
            eng.ledger.request_many(movers[1:], MoveRequest("beta", "baremetal", ("beta-net",)))
            t1 = time.perf_counter()
            bres = eng.run_pending(limit=64)
            b, bw = time.perf_counter() - t0, time.perf_counter() - t1
            assert bres is not None and len(bres.moves) == BATCH and all(m.finished for m in bres.moves)
            row["coalesced"] = {"moves": BATCH, "seconds": round(b, 3), "requests_s": round(t1 - t0, 3),
                                "worker_s": round(bw, 3), "ratio_to_one_move": round(b / one, 2),
                                "worker_ratio_to_one_move_worker": round(bw / statistics.median(workers), 2),
                                "phases": {t.phase: round(t.seconds, 3) for t in bres.timings},
                                "target_ratio": 2.0, "changes": _changes(bres)}  # fmt: skip
            eng.fabrics.close()  # the command below is another process; leave it the fabrics
            where = "beta" if where == "alpha" else "alpha"
            row["command"] = command_move(fab, movers[0], where)
            row["served"] = served_moves(fab, movers[0], where)  # from where the command left it
            row["loadavg_end"] = loadavg()
            return row
        finally:
            eng.fabrics.close()
            fab.stop()


def run_moves_bench(sizes: tuple[tuple[int, int], ...] = SIZES, runs: int = RUNS) -> list[dict[str, Any]]:
    rows = [bench_size(n, h, runs) for n, h in sizes]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": "moves", "date": datetime.now(UTC).isoformat(timespec="seconds"), "cpus": os.cpu_count(),
           "rows": rows}  # fmt: skip
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    sizes = tuple(s for s in SIZES if not sys.argv[1:] or str(s[0] * s[1]) in sys.argv[1:])
    for r in run_moves_bench(sizes):
        print(json.dumps(r))
