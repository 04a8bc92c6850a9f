"""Import of whole real InfiniBand fabrics (issue 21): ``gpufabric inventory import FILE
--format ibnetdiscover --json`` of the largest real ``ibnetdiscover`` outputs in
tests/fixtures/real/ibnetdiscover/ (NVIDIA Selene's DGX SuperPOD compute fabric: 666 switches,
666 SHARP aggregation nodes, 3,675 HCAs of 469 hosts; a 400-switch UFM site saved with PuTTY),
each into a fresh SQLite home, as an operator runs it.

Measured per file, ``RUNS`` times: the command's wall time and its peak RSS (``wait4``'s
``ru_maxrss`` of that child alone), and the floor in the same run: the pure parse of the same
text (``parse_ibnetdiscover``, in this process, file already read) — the least any import must
do. The floor excludes the interpreter's start, matching CAs to hosts, the report and the
store's transaction; the ratio says what those cost. The command's result is checked (nodes
and the matched/skipped summary) so a fast wrong import cannot pass.

Results: ``bench/results/real_import.json``. Run: ``python -m bench.bench_real_import``
(``make bench``: ``BENCH_ONLY=real_import``).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpufabric.fabrics.infiniband.readers.ibnetdiscover import parse_ibnetdiscover

from bench.benchlab import loadavg

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "fixtures" / "real" / "ibnetdiscover"
RESULTS = Path(__file__).parent / "results" / "real_import.json"
GF = str(ROOT / ".venv" / "bin" / "gpufabric")
RUNS = 3
FILES = {  # file -> (nodes, summary) the import must report (as tests/e2e/test_real_import.py pins)
    "selene-compute.topo": (469, {"matched": 3675, "sharp-aggregation-node": 666, "switch": 666}),
    "ufm-ndt-director-putty.topo": (280, None),
}


def _import(path: Path) -> tuple[float, float, dict[str, Any]]:
    """(wall s, peak RSS MB, JSON result) of one import into a fresh home (its output to files,
    the child reaped here with ``wait4`` for its own rusage)."""
    home = Path(tempfile.mkdtemp(prefix="gf-bench-import-"))
    try:
        env = {**os.environ, "GPUFABRIC_HOME": str(home), "GPUFABRIC_DB": ""}
        with (home / "out.json").open("w+") as out, (home / "err.txt").open("w+") as err:
            t0 = time.monotonic()
            p = subprocess.Popen(
                [GF, "inventory", "import", str(path), "--format", "ibnetdiscover", "--json"],
                env=env, stdout=out, stderr=err,
            )  # fmt: skip
            _pid, status, usage = os.wait4(p.pid, 0)
            wall = time.monotonic() - t0
            p.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            assert p.returncode == 0, err.read()
            return wall, usage.ru_maxrss / 1024, json.loads(out.read())
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run_real_import_bench(runs: int = RUNS) -> list[dict[str, Any]]:
    rows = []
    measured: dict[str, tuple[list[float], list[float]]] = {}
    for name, (nodes, summary) in FILES.items():  # every import first: a child's ru_maxrss counts
        path = REAL / name  # the parent's pages until it execs, so the parent parses nothing yet
        if not path.exists():
            rows.append({"file": name, "skipped": "not present (see tests/fixtures/real/README.md)"})
            continue
        walls, peaks = [], []
        for _ in range(runs):
            wall, peak, res = _import(path)
            assert res["nodes"] == nodes, res["nodes"]
            if summary is not None:
                assert res["summary"] == summary, res["summary"]
            walls.append(wall)
            peaks.append(peak)
        measured[name] = (walls, peaks)
    for name, (walls, peaks) in measured.items():
        text = (REAL / name).read_text()
        floors = []
        for _ in range(runs):
            t0 = time.monotonic()
            topo = parse_ibnetdiscover(text)
            floors.append(time.monotonic() - t0)
        wall_m, floor_m = statistics.median(walls), statistics.median(floors)
        rows.append({"file": name, "bytes": len(text.encode()), "nodes": FILES[name][0], "runs": runs,
                     "cas_parsed": len(getattr(topo, "nodes", ()) or ()),
                     "import_wall_median_s": round(wall_m, 3), "import_wall_runs_s": [round(w, 3) for w in walls],
                     "peak_rss_mb_max": round(max(peaks), 1),
                     "floor_parse_median_s": round(floor_m, 3), "ratio_to_parse": round(wall_m / floor_m, 1),
                     "loadavg": loadavg()})  # fmt: skip
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": "real ibnetdiscover import", "date": datetime.now(UTC).isoformat(timespec="seconds"),
           "cpus": os.cpu_count(), "rows": rows}  # fmt: skip
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    for r in run_real_import_bench():
        print(json.dumps(r))
