"""The served ``node move`` against its two-change floor, interleaved in one session (issue 31, item 10).

On a bench fabric of 34 HCAs (:mod:`bench.benchlab`: ibsim + OpenSM, OVS over OVSDB; 33 nodes
leased to ``alpha`` first), one ``gpufabric serve`` started with its default settings (its
worker's window, reconcile loop every 30 s, rogue-SM watch every 0.5 s: what a user runs) and,
in this process, a warm MoveEngine over the same fabrics and store. Then, ``RUNS`` times,
one pair, alternating the node's tenant (alpha <-> beta):

* ``floor`` (:func:`bench.bench_moves.floor`): the move's two changes, its quarantine plan and
  its join plan, each applied through ``Fabrics.apply`` (Ethernet and IB in parallel: one
  OVSDB transaction confirmed by ``cur_cfg`` + read-back; one OpenSM reload verified by SMP
  reads of the changed ports), warm, in process, under the fabric lock (the server's reconcile
  pass cannot run in between), timed; then the way back, untimed. It excludes everything
  else a served move does: the command's start (interpreter, imports), the HTTP request and
  the event stream, the worker's wake and claim, the store's reads and writes (the move's
  durable phases), planning, the fabric lock and epoch, the progress events.
* ``served``: ``gpufabric node move <node> --to-tenant T --network T-net --json`` as a fresh
  process against the server (``GPUFABRIC_API``), wall time from spawn to exit.

The pair's ratio is served / floor; the row gives both medians, their ratio, and the
per-pair ratios (sorted, median, min, max). Then ``gpufabric node move`` of 32 nodes in one
command (``POST /moves/batch``): one batch when every move's recorded phase timings are the
same (each phase is timed once per batch and recorded with every move's end).

Results: ``bench/results/served_interleaved.json``. Run (root): ``python -m bench.bench_served``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpufabric.domain.moves import MoveRequest
from gpufabric.lab.serve import serving

from bench.bench_moves import floor, installed_env
from bench.benchlab import loadavg, start

RESULTS = Path(__file__).parent / "results" / "served_interleaved.json"
RUNS = int(os.environ.get("GF_BENCH_SERVED_RUNS", "15"))
BATCH = 32


def _move(exe: str, env: dict[str, str], nodes: list[str], to: str) -> tuple[float, list[dict[str, Any]]]:
    t0 = time.perf_counter()
    out = subprocess.run([exe, "node", "move", *nodes, "--to-tenant", to, "--network", f"{to}-net", "--json"],
                         env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    wall = time.perf_counter() - t0
    assert out.returncode == 0, (out.returncode, out.stdout[-500:], out.stderr[-500:])
    moves = json.loads(out.stdout)["moves"]
    assert len(moves) == len(nodes) and all(m["status"] == "done" for m in moves), moves
    return wall, moves


def _dist(xs: list[float]) -> dict[str, Any]:
    return {"median": round(statistics.median(xs), 3), "min": round(min(xs), 3), "max": round(max(xs), 3),
            "sorted": [round(x, 3) for x in sorted(xs)]}  # fmt: skip


def interleaved(
    runs: int = RUNS, serve_args: tuple[str, ...] = (), trees: dict[str, str] | None = None, rounds: int = 1
) -> dict[str, Any]:
    """The row (see module docstring). ``trees`` (label -> a checkout's ``src``): an A/B of
    serve and the CLI of each tree (``PYTHONPATH``), ``rounds`` times alternated (a fresh serve of
    each tree per round, ``runs`` pairs each), on the same fabric and the same floor engine."""
    exe = str(Path(sys.executable).parent / "gpufabric")
    trees = trees or {"this tree": ""}
    pairs: dict[str, list[tuple[float, float, float]]] = {t: [] for t in trees}
    with tempfile.TemporaryDirectory(prefix="gf-bench-served-") as tmp:
        fab = start(Path(tmp), 34, 1)
        eng = fab.engine()
        try:
            for t in ("alpha", "beta"):
                eng.store.create_tenant(t)
                eng.store.create_network(f"{t}-net", t, eng.cfg, eng.kinds)
            names = [n.name for n in fab.nodes]
            for n in names[:33]:
                eng.ledger.request(n, MoveRequest("alpha", "baremetal", ("alpha-net",)))
            eng.run_pending(limit=64)
            env = {**installed_env(), "GPUFABRIC_HOME": str(fab.home)}
            token = json.loads(subprocess.run([exe, "token", "create", "--role", "admin", "--name", "bench", "--json"],
                                              env=env, capture_output=True, text=True, check=True).stdout)["secret"]  # fmt: skip
            node, where = names[0], "alpha"
            load_start = loadavg()
            for _ in range(rounds):
                for label, src in trees.items():
                    tree_env = {**env, "PYTHONPATH": src} if src else env
                    with serving(tree_env, *serve_args) as srv:
                        api = {**tree_env, "GPUFABRIC_API": srv.base, "GPUFABRIC_TOKEN": token}
                        for _ in range(2):  # warm: the server's first (cold) observe, then one warm move
                            where = "beta" if where == "alpha" else "alpha"
                            _move(exe, api, [node], where)
                        for _ in range(runs):
                            where = "beta" if where == "alpha" else "alpha"
                            with eng.ledger.lock.held():  # the server's reconcile pass waits (a move would too)
                                f, counts = floor(eng, node, where)
                            wall, moves = _move(exe, api, [node], where)
                            pairs[label].append((f, wall, sum(moves[0]["timings"].values())))
                        if label == list(trees)[-1]:
                            bwall, bmoves = _move(exe, api, names[1 : BATCH + 1], "beta")  # 32 of alpha's nodes
                            batches = {json.dumps(m["timings"], sort_keys=True) for m in bmoves}
                            _move(exe, api, names[1 : BATCH + 1], "alpha")  # back, for the next round
            load_end = loadavg()
        finally:
            eng.fabrics.close()
            fab.stop()
    out: dict[str, Any] = {}
    for label, ps in pairs.items():
        floors, walls, engines = [p[0] for p in ps], [p[1] for p in ps], [p[2] for p in ps]
        ratios = [w / f for f, w, _ in ps]
        out[label] = {"runs": len(ps), "floor_s": _dist(floors), "served_wall_s": _dist(walls),
                      "served_engine_s": _dist(engines),
                      "ratio_of_medians": round(statistics.median(walls) / statistics.median(floors), 2),
                      "pair_ratio": _dist(ratios)}  # fmt: skip
    return {
        "case": "served node move (serve's defaults) vs its two-change floor, interleaved, 34 HCAs",
        "serve_args": list(serve_args) or "defaults", "floor_changes": counts, "target_ratio": 2.0,
        **(out[next(iter(out))] if len(out) == 1 else {"trees": {k: trees[k] or "this tree" for k in trees}, "ab": out}),
        "coalesced": {"moves": BATCH, "one_batch": len(batches) == 1, "batches_seen": len(batches),
                      "wall_s": round(bwall, 3), "timings": json.loads(next(iter(batches)))},
        "loadavg_start": load_start, "loadavg_end": load_end,
    }  # fmt: skip


def run_served_bench(runs: int = RUNS) -> dict[str, Any]:
    """``GF_BENCH_SERVED_AB=label=src,label=src`` (and ``GF_BENCH_SERVED_ROUNDS``): an A/B of trees."""
    ab = os.environ.get("GF_BENCH_SERVED_AB", "")
    trees = dict(x.split("=", 1) for x in ab.split(",")) if ab else None
    row = interleaved(runs, trees=trees, rounds=int(os.environ.get("GF_BENCH_SERVED_ROUNDS", "1")))
    doc = {"benchmark": "served_interleaved", "date": datetime.now(UTC).isoformat(timespec="seconds"),
           "cpus": os.cpu_count(), "rows": [row]}  # fmt: skip
    if os.environ.get("GF_BENCH_SERVED_WRITE", "1") != "0":
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    return row


if __name__ == "__main__":
    print(json.dumps(run_served_bench(), indent=1))
