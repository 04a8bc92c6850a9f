"""Slot move benchmark (issue 33): a slot of a shared host moved between tenants on the lab's real
fabrics (``gpufabric lab up --vm-hosts``: ibsim + OpenSM with 8 rail HCAs per host, the host's own
OVS with a VM port per GPU and its trunk on the leaf, Fabric Manager's stand-in), warm engine.

gpu-a01 is a ``vm-host`` of ``infra`` with slots of alpha (4 GPUs), beta (2) and gamma (2); beta's
slot is moved beta -> delta -> beta ... through a long-lived MoveEngine built as the CLI builds it
(``open_engine``: the product's defaults), interleaved with its floor:

* ``floor`` (:func:`bench.bench_moves.floor`): the same fabric work as the slot's move and nothing
  else: its quarantine plan and its join plan applied and verified through ``Fabrics.apply`` (the
  slot's VM ports and the host's trunk on OVS, its two rail HCAs' PKeys by an OpenSM reload and SMP
  read-back, its partition on FM), timed; the way back untimed. Excluded (and in the move): reading
  the store, the desired state, planning, the move ledger's writes, the fabric lock and epoch.
* ``one slot move``: ``ledger.request`` + ``run_pending`` (:func:`bench.bench_moves.one_move`,
  which asserts both phases changed Ethernet and InfiniBand ports), timed from request to done.

Target: one slot move <= 1.2x its floor (median of ``RUNS``; min-to-min too). Results:
``bench/results/slot_move.json``. Run: ``python -m bench.bench_slot_move`` (root: the lab).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.bench_moves import floor, one_move
from bench.benchlab import loadavg

RESULTS = Path(__file__).parent / "results" / "slot_move.json"
RUNS = 9
GF = str(Path(sys.executable).parent / "gpufabric")


def _gf(home: Path, *args: str) -> Any:
    env = {**os.environ, "GPUFABRIC_HOME": str(home), "GPUFABRIC_DB": ""}
    out = subprocess.run([GF, *args, "--json"], env=env, capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout) if out.stdout.strip() else None


def run_slot_move_bench(runs: int = RUNS) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gf-bench-slots-") as tmp:
        home = Path(tmp)
        _gf(home, "lab", "up", "--nodes", "2", "--hcas-per-node", "8", "--vm-hosts", "gpu-a01,gpu-a02")
        try:
            for t in ("infra", "alpha", "beta", "gamma", "delta"):
                _gf(home, "tenant", "create", t)
                if t != "infra":
                    _gf(home, "network", "create", f"{t}-net", "--tenant", t)
            _gf(home, "lease", "create", "--node", "gpu-a01", "--tenant", "infra", "--offering", "vm-host", "--no-networks")
            for t, k in (("alpha", 4), ("beta", 2), ("gamma", 2)):
                _gf(home, "lease", "create", "--node", "gpu-a01", "--gpus", str(k), "--tenant", t, "--network", f"{t}-net")
            slot = next(n["name"] for n in _gf(home, "node", "list") if n.get("host") and n["tenant"] == "beta")
            os.environ["GPUFABRIC_HOME"], os.environ["GPUFABRIC_DB"] = str(home), ""
            from gpufabric.cli.common import open_engine

            eng = open_engine()
            try:
                row: dict[str, Any] = {"slot": slot, "loadavg_start": loadavg()}
                floors, moves, phases = [], [], []
                where = "beta"
                one_move(eng, slot, "delta")  # warm-up: the engine's first read of every fabric
                where = "delta"
                for _ in range(runs):
                    where = "beta" if where == "delta" else "delta"
                    f, counts = floor(eng, slot, where)
                    floors.append(f)
                    s, res, _w = one_move(eng, slot, where)
                    moves.append(s)
                    phases.append({t.phase: round(t.seconds, 3) for t in res.timings})
                fl, mv = statistics.median(floors), statistics.median(moves)
                row.update({
                    "floor": {"median_s": round(fl, 3), "min_s": round(min(floors), 3), "runs": [round(x, 3) for x in floors],
                              "changes": counts},
                    "one_slot_move": {"median_s": round(mv, 3), "min_s": round(min(moves), 3), "runs": [round(x, 3) for x in moves],
                                      "phases": phases[-1], "ratio_to_floor": round(mv / fl, 2),
                                      "ratio_min_to_min": round(min(moves) / min(floors), 2), "target_ratio": 1.2},
                    "loadavg_end": loadavg(),
                })  # fmt: skip
            finally:
                eng.fabrics.close()
        finally:
            _gf(home, "lab", "down")
    doc = {"benchmark": "slot_move", "date": datetime.now(UTC).isoformat(timespec="seconds"), "cpus": os.cpu_count(), **row}
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    return doc


if __name__ == "__main__":
    print(json.dumps(run_slot_move_bench(), indent=1))
