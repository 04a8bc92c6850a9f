"""Where the time of one move goes at N HCAs (issue 20): the OpenSM driver's phases, timed
by wrapping its methods and functions, next to the floor of the same move, in turn, ROUNDS
times (bench_ib_scale's fabric, layouts and floor; cProfile of each move in
/tmp/gf-ibprof-<hcas>-<round>.txt).

Each round's row: ``move_s``, ``floor_s``, ``ratio``, ``phases`` ({name: [seconds, calls]}
over the move's two applies, nested: ``render`` includes ``check_layout``), the driver's
``reports`` (sweep = reload -> SUBNET UP, verify = SUBNET UP -> tables verified) and
``reader_starts`` (smpbatch processes started during the move).

Run: ``.venv/bin/python -m bench.profile_ib_move [HCAS [ROUNDS [LABEL]]]``; the rows go to
bench/results/ib_move_profile.json under LABEL (other labels kept: before/after a change).
"""

from __future__ import annotations

import cProfile
import functools
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from gpufabric.fabrics.infiniband.drivers.opensm import driver as opensm
from gpufabric.fabrics.infiniband.drivers.opensm import knownfile
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.netfile import SM_NODE, generate_netfile, hca_port_guid

from bench import bench_ib_scale as b

RESULTS = Path(__file__).parent / "results" / "ib_move_profile.json"
SPENT: dict[str, float] = defaultdict(float)
CALLS: dict[str, int] = defaultdict(int)


def wrap(obj: Any, name: str, label: str) -> None:
    f = getattr(obj, name, None)
    if f is None:
        return

    @functools.wraps(f)
    def timed(*a: Any, **k: Any) -> Any:
        t = time.monotonic()
        try:
            return f(*a, **k)
        finally:
            SPENT[label] += time.monotonic() - t
            CALLS[label] += 1

    setattr(obj, name, timed)


def instrument(drv: opensm.OpenSMDriver) -> None:
    for m in ("render", "check_ipoib_budget", "master", "_locate", "_reload_and_wait", "verify", "_mark_good"):
        wrap(drv, m, m)
    for mod in (opensm, knownfile):
        short = mod.__name__.rsplit(".", 1)[1]
        for m in ("check_layout", "render_checked", "entries_by_port", "changed_ports", "changed_entries",
                  "layout_guids", "_safe_parse", "safe_parse", "parse_opensm_log", "read_pkeys"):  # fmt: skip
            wrap(mod, m, f"{short}.{m}")
    wrap(drv.fleet, "write_all", "fleet.write_all")
    for m in ("read", "read_from"):
        wrap(drv.fleet.hosts[0], m, f"host.{m}")
    for m in ("_ensure", "_exchange"):
        wrap(drv.reader, m, f"reader.{m}")


def profile(hcas: int, rounds: int) -> dict[str, Any]:
    nodes = hcas // b.HCAS_PER_NODE
    out: dict[str, Any] = {"hcas": hcas, "loadavg_start": round(os.getloadavg()[0], 1), "rounds": []}
    with tempfile.TemporaryDirectory(prefix="gf-bench-ibprof-") as tmp:
        fab = IbFabric(Path(tmp), f"gf-ibprof-{os.getpid()}", SM_NODE)
        drv = b.driver(fab)
        try:
            fab.start_ibsim(generate_netfile(nodes, b.HCAS_PER_NODE, leaf_ports=b.LEAF_PORTS),
                            max_nodes=2 * nodes + 4096, max_ports=4 * hcas + 65536)  # fmt: skip
            fab.start_opensm(timeout=1800)
            drv.ports(refresh=True)
            assign = {n: (n - 1) // b.NODES_PER_TENANT for n in range(1, nodes + 1)}
            tenants = max(assign.values()) + 1
            drv.apply(b.layout_for(assign))
            instrument(drv)
            for r in range(rounds):
                movers = [1 + r]
                parked, after, assign_after = b.steps(assign, movers, tenants)
                SPENT.clear()
                CALLS.clear()
                starts = getattr(drv.reader, "starts", 0)
                prof = cProfile.Profile()
                t0 = time.monotonic()
                prof.enable()
                drv.apply(parked)
                first = drv.last_report
                drv.apply(after)
                prof.disable()
                t = time.monotonic() - t0
                phases = {k: [round(v, 3), CALLS[k]] for k, v in sorted(SPENT.items(), key=lambda kv: -kv[1])}
                reports = [{"sweep": round(x.sweep_seconds, 3), "verify": round(x.verify_seconds, 3),
                            "total": round(x.total_seconds, 3), "ports": x.ports_checked} for x in (first, drv.last_report)]  # fmt: skip
                started = getattr(drv.reader, "starts", 0) - starts
                drv.apply(b.steps(assign_after, movers, tenants)[0])
                drv.apply(b.layout_for(assign))
                guids = [hca_port_guid(m, h) for m in movers for h in range(b.HCAS_PER_NODE)]
                f = b.floor(drv, fab, (drv.render(parked), drv.render(after)), guids)
                drv.apply(b.layout_for(assign))
                text = io.StringIO()
                pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(40)
                Path(f"/tmp/gf-ibprof-{hcas}-{r}.txt").write_text(text.getvalue())
                row = {"move_s": round(t, 3), "floor_s": round(f, 3), "ratio": round(t / f, 2), "phases": phases,
                       "reports": reports, "reader_starts": started, "loadavg": round(os.getloadavg()[0], 1)}  # fmt: skip
                out["rounds"].append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
        finally:
            drv.close()
            fab.stop()
    out["median_ratio"] = statistics.median(r["ratio"] for r in out["rounds"]) if out["rounds"] else None
    return out


def main(argv: list[str]) -> int:
    hcas = int(argv[0]) if argv else 4096
    rounds = int(argv[1]) if len(argv) > 1 else 3
    label = argv[2] if len(argv) > 2 else "run"
    doc = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"benchmark": "ib_move_profile", "runs": {}}
    doc["runs"][label] = profile(hcas, rounds)
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
