"""``make bench``: every benchmark, each a ratio against a floor or a peer measured in the
same run; results land in ``bench/results/*.json``. Set ``BENCH_ONLY=name,name`` to pick
(audit, ethernet, ngs, ib, ib_scale, moves, bridges, churn, api, cli, takeover, real_import,
slot_packing, slot_move). ``GF_CHURN_SECONDS`` sets the churn
duration (default 300). The whole run takes ~20 minutes on 2 cores."""

from __future__ import annotations

import importlib
import json
import os
import time
from collections.abc import Callable
from typing import Any

SUITES: dict[str, tuple[str, str]] = {
    "audit": ("bench.bench_audit", "run_audit_bench"),
    "ethernet": ("bench.bench_ethernet", "run_ovsdb"),
    "ngs": ("bench.bench_ngs", "run_ngs_comparison"),
    "ib": ("bench.bench_ib", "run_ib_bench"),
    "moves": ("bench.bench_moves", "run_moves_bench"),
    "bridges": ("bench.bench_bridges", "run_bridges_bench"),
    "churn": ("bench.bench_churn", "run_churn_bench"),
    "api": ("bench.bench_api", "run_api_bench"),
    "cli": ("bench.bench_cli", "run_cli_bench"),
    "takeover": ("bench.bench_takeover", "run_takeover_bench"),
    "ib_scale": ("bench.bench_ib_scale", "run_ib_scale_bench"),
    "real_import": ("bench.bench_real_import", "run_real_import_bench"),
    "slot_packing": ("bench.bench_slot_packing", "run_slot_packing_bench"),
    "slot_move": ("bench.bench_slot_move", "run_slot_move_bench"),
}


def main() -> None:
    only = [s for s in os.environ.get("BENCH_ONLY", "").split(",") if s]
    for name, (module, func) in SUITES.items():
        if only and name not in only:
            continue
        fn: Callable[[], list[dict[str, Any]]] = getattr(importlib.import_module(module), func)
        t0 = time.monotonic()
        print(f"== {name} ({module}.{func})", flush=True)
        for row in fn():
            print("  " + json.dumps(row, sort_keys=True), flush=True)
        print(f"   {time.monotonic() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
