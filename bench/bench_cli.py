"""CLI start through ``--api`` and ``node move`` through a warm ``gpufabric serve`` (issue 19, item 6).

* ``start``: ``gpufabric --api http://127.0.0.1:<refused port> --token x node list --json``
  (the whole command: interpreter, imports, the connect that is refused, the one-line JSON
  error) against ``python -c pass`` in the same run, interleaved, ``RUNS`` times each; also a
  minimal typer app with one option and one command (what the CLI framework alone costs:
  typer 0.2x coerces every option through a pydantic TypeAdapter, so it imports pydantic) and,
  with ``GF_BENCH_CLI_BASE=<src dir of an older checkout>``, the same command of that checkout
  (``before``). Target: median ≤ 8× ``python -c pass``.
* ``served`` (root: a bench fabric of 34 HCAs): :func:`bench.bench_served.interleaved`, the
  move's two-change floor (:func:`bench.bench_moves.floor`: its quarantine and join plans
  applied and verified, in process, warm, nothing else) and ``gpufabric node move`` through a
  warm ``gpufabric serve`` run with its default settings (a fresh process per move), pair by
  pair in one session: medians, their ratio and the per-pair ratios. Target ≤ 2× (issue 31).
  ``GF_BENCH_CLI_SERVED=0`` skips it.

Results: ``bench/results/cli.json``. Run: ``python -m bench.bench_cli`` (``make bench``: ``BENCH_ONLY=cli``).
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

from bench.benchlab import loadavg

RESULTS = Path(__file__).parent / "results" / "cli.json"
RUNS = 21
SERVED_RUNS = 15
TYPER_FLOOR = """
import typer
app = typer.Typer()
@app.callback()
def g(api: str = typer.Option("", "--api")) -> None: ...
@app.command("list")
def c(json_out: bool = typer.Option(False, "--json")) -> None: ...
app()
"""


def _refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wall(cmd: list[str], env: dict[str, str], want_rc: int) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - t0
    assert p.returncode == want_rc, (cmd, p.returncode, p.stdout[-300:], p.stderr[-300:])
    return wall


def _stats(xs: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(xs), 4), "min_s": round(min(xs), 4)}


def start_bench(runs: int = RUNS) -> dict[str, Any]:
    py, exe = sys.executable, str(Path(sys.executable).parent / "gpufabric")
    url = f"http://127.0.0.1:{_refused_port()}"
    args = ["--api", url, "--token", "x", "node", "list", "--json"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GPUFABRIC_HOME": tempfile.gettempdir() + "/gf-bench-cli"}
    if os.environ.get("PYTHONPATH"):  # a checkout's src put first (a worktree): its code, not the installed one
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    cases: dict[str, tuple[list[str], int]] = {
        "python -c pass": ([py, "-c", "pass"], 0),
        "typer floor (one option, one command)": ([py, "-c", TYPER_FLOOR, "list"], 0),
        "gpufabric --api (refused) node list --json": ([exe, *args], 2),
    }
    base = os.environ.get("GF_BENCH_CLI_BASE")
    if base:
        run_base = f"import sys; sys.path.insert(0, {base!r}); sys.argv[0] = 'gpufabric'; " \
                   "from gpufabric.cli.main import main; main()"  # fmt: skip
        cases["before: the same command of " + base] = ([py, "-c", run_base, *args], 2)
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(runs):  # interleaved: the load of the shared machine falls on every case alike
        for name, (cmd, rc) in cases.items():
            times[name].append(_wall(cmd, env, rc))
    floor = times["python -c pass"]
    rows = {}
    for name, xs in times.items():
        rows[name] = {**_stats(xs), "ratio_median": round(statistics.median(xs) / statistics.median(floor), 1),
                      "ratio_min": round(min(xs) / min(floor), 1)}  # fmt: skip
    return {"case": "start", "runs": runs, "cases": rows, "target_ratio": 8.0}


def served_bench(runs: int = SERVED_RUNS) -> dict[str, Any]:
    """The served move against its floor, interleaved pair by pair (:func:`bench.bench_served.interleaved`)."""
    from bench.bench_served import interleaved

    return interleaved(runs)


def run_cli_bench() -> list[dict[str, Any]]:
    rows = [{**start_bench(), "loadavg": loadavg()}]
    if os.environ.get("GF_BENCH_CLI_SERVED", "1") != "0" and os.geteuid() == 0:
        rows.append({**served_bench(), "loadavg": loadavg()})
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": "cli", "date": datetime.now(UTC).isoformat(timespec="seconds"), "cpus": os.cpu_count(),
           "rows": rows}  # fmt: skip
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    for r in run_cli_bench():
        print(json.dumps(r))
