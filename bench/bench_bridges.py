"""32 leaf bridges on one OVSDB server: first observe time and peak memory of the process.

A private OVS (own network namespace) with 32 netdev leaf bridges of 32 internal ports each
(1,024 ports, the shape of a 1,024-node lab's top-of-rack layer). A fresh Python process
builds the Ethernet backend from a ``fabrics.yaml``-style section (one ``ovsdb`` driver per
bridge, as ``gpufabric lab up`` writes it) and times its first ``observe()`` (imports
excluded; connection, schema fetch and initial monitor included), then reports its peak
RSS (``VmHWM`` of /proc/self/status). Two ways, each in its own process:

* ``shared``: the backend's OvsdbPool — one connection for the 32 drivers (the default);
* ``per-driver``: each driver with a private connection (what every driver did before).

Targets (shared): first observe <= 2 s, peak RSS <= 300 MB.
Run: ``python -m bench.bench_bridges`` (writes bench/results/bridges.json).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "bridges.json"
BRIDGES = 32
PORTS = 32


def _vm(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])  # kB
    return 0


def child(remote: str, bridges: list[str], mode: str) -> dict[str, Any]:
    from gpufabric.fabrics.ethernet.drivers.ovsdb.driver import OvsdbSwitchDriver
    from gpufabric.fabrics.ethernet.kind import EthernetKind
    from gpufabric.store.registry import Registry

    registry = Registry.from_entry_points()  # imports every fabric kind and driver: not part of observe
    base = _vm("VmRSS")
    t0 = time.perf_counter()
    if mode == "shared":
        section = [{"driver": "ovsdb", "options": {"switch": b, "remote": remote}} for b in bridges]
        backend = EthernetKind().build(section, registry.get, {"quarantine_vlan": 4000})
        state = backend.observe()
        closer = backend.close
    else:
        drivers = [OvsdbSwitchDriver(b, remote, 4000) for b in bridges]
        state = tuple(d.observe() for d in drivers)

        def closer() -> None:
            for d in drivers:
                d.close()

    first = time.perf_counter() - t0
    t1 = time.perf_counter()
    if mode == "shared":
        backend.observe()
    else:
        tuple(d.observe() for d in drivers)
    again = time.perf_counter() - t1
    out = {
        "mode": mode, "bridges": len(state), "ports": sum(len(s.ports) for s in state),
        "first_observe_s": round(first, 3), "next_observe_s": round(again, 4),
        "peak_rss_mb": round(_vm("VmHWM") / 1024, 1), "rss_before_connect_mb": round(base / 1024, 1),
    }  # fmt: skip
    closer()
    return out


def run_bridges_bench() -> list[dict[str, Any]]:
    from gpufabric.lab.ovs import OvsServer

    from bench.benchlab import loadavg

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gf-bench-br-") as tmp:
        prefix = f"gr{os.getpid() % 10000}"
        ovs = OvsServer(Path(tmp), netns=f"{prefix}-ovs")
        ovs.start()
        try:
            bridges = [f"{prefix}l{i:02d}" for i in range(BRIDGES)]
            args: list[str] = []
            for b in bridges:
                args += ["--", "add-br", b, "--", "set", "bridge", b, "datapath_type=netdev"]
                for k in range(PORTS):
                    args += ["--", "add-port", b, f"{b}p{k}", "--", "set", "interface", f"{b}p{k}", "type=internal"]
            ovs.vsctl(*args[1:], timeout=600)
            for mode in ("shared", "per-driver"):
                out = subprocess.run(
                    [sys.executable, "-m", "bench.bench_bridges", "--child", ovs.remote, mode, *bridges],
                    capture_output=True, text=True, timeout=900, check=True, cwd=Path(__file__).parent.parent,
                )  # fmt: skip
                row = json.loads(out.stdout.strip().splitlines()[-1])
                row["loadavg"] = loadavg()
                if mode == "shared":
                    row["target_first_observe_s"], row["target_peak_rss_mb"] = 2.0, 300
                    row["ok"] = row["first_observe_s"] <= 2.0 and row["peak_rss_mb"] <= 300
                rows.append(row)
        finally:
            ovs.stop()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": "bridges", "date": datetime.now(UTC).isoformat(timespec="seconds"), "rows": rows}
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(child(sys.argv[2], sys.argv[4:], sys.argv[3])))
    else:
        for r in run_bridges_bench():
            print(json.dumps(r))
