"""Benchmark of binding Ethernet ports to VLANs, OVSDB driver part.

Against a private OVS (ovsdb-server + ovs-vswitchd in its own network namespace,
userspace datapath) with one bridge of 200 internal ports, binds 10 / 50 / 200 ports to
new access VLANs with ONE ``OvsdbSwitchDriver.apply`` (one OVSDB transaction; the call
returns once ovs-vswitchd has applied it), and for comparison the same ports with one
``apply`` per port. Every run changes every port (new VLANs), so nothing is a no-op.

The transaction count is checked from ovsdb-server's own database log
(``ovsdb-tool show-log -m``): records carrying the driver's comment, and how many Port
rows they changed.

Run: ``.venv/bin/python -m bench.bench_ethernet`` (writes bench/results/ethernet_ovsdb.json),
or call :func:`run_ovsdb` from ``bench.run``.
"""

from __future__ import annotations

import json
import secrets
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.drivers.ovsdb.driver import COMMENT_PREFIX, OvsdbSwitchDriver
from gpufabric.fabrics.ethernet.readers.ovsdb_log import parse_show_log, records_with_comment
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode
from gpufabric.lab.ovs import OvsServer
from gpufabric.lab.procs import run

SIZES = (10, 50, 200)
RUNS = 5
QUARANTINE = VlanId(4000)
RESULTS = Path(__file__).resolve().parent / "results" / "ethernet_ovsdb.json"


def _our_log_records(ovs: OvsServer, since: int) -> tuple[int, int, int]:
    """(log length, our transactions since ``since``, Port rows they changed)."""
    records = parse_show_log(run(["ovsdb-tool", "show-log", "-m", str(ovs.db)]))
    ours = records_with_comment(records[since:], COMMENT_PREFIX)
    return len(records), len(ours), sum(len(r.rows_of("Port")) for r in ours)


def _batch(bridge: str, ports: list[str], base: int) -> list[EthernetPortConfig]:
    return [EthernetPortConfig(bridge, p, PortMode.ACCESS, VlanId(base + i)) for i, p in enumerate(ports)]


def run_ovsdb(sizes: tuple[int, ...] = SIZES, runs: int = RUNS, write: bool = True) -> list[dict[str, object]]:
    """Time binding each size of batch; return one row per size (and write the JSON file)."""
    prefix = "gb" + secrets.token_hex(2)
    bridge = f"{prefix}br"
    n_ports = max(sizes)
    ports = [f"{prefix}p{i:03d}" for i in range(n_ports)]
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="gpf-bench-eth-") as tmp:
        ovs = OvsServer(Path(tmp) / "ovs", netns=f"{prefix}-ovs")
        ovs.start()
        try:
            ovs.add_bridge(bridge)
            for chunk in range(0, n_ports, 50):
                args: list[str] = []
                for p in ports[chunk : chunk + 50]:
                    args += ["--", "add-port", bridge, p, "--", "set", "port", p, f"tag={QUARANTINE.value}",
                             "protected=true", "--", "set", "interface", p, "type=internal"]  # fmt: skip
                ovs.vsctl(*args, timeout=120)
            with OvsdbSwitchDriver(bridge, ovs.remote, QUARANTINE, timeout=60) as driver:
                driver.observe()  # connect outside the timings
                base = 100
                for size in sizes:
                    sel = ports[:size]
                    batch_times: list[float] = []
                    log_len, _, _ = _our_log_records(ovs, 0)
                    txn_before = driver.transactions
                    for _ in range(runs):
                        base += size
                        batch = _batch(bridge, sel, base)
                        t0 = time.perf_counter()
                        driver.apply(batch)
                        batch_times.append(time.perf_counter() - t0)
                    client_txns = driver.transactions - txn_before
                    log_len, log_txns, log_port_rows = _our_log_records(ovs, log_len)
                    state = driver.observe()
                    assert [state.port(p) for p in sel] == batch, "observe after apply differs"
                    observe_times = []
                    for _ in range(runs):
                        t0 = time.perf_counter()
                        driver.observe()
                        observe_times.append(time.perf_counter() - t0)

                    base += size
                    t0 = time.perf_counter()
                    for cfg in _batch(bridge, sel, base):
                        driver.apply([cfg])
                    per_port_s = time.perf_counter() - t0
                    _, per_port_txns, _ = _our_log_records(ovs, log_len)
                    rows.append(
                        {
                            "driver": "ovsdb",
                            "ports": size,
                            "runs": runs,
                            "batch_apply_s_median": round(statistics.median(batch_times), 4),
                            "batch_apply_s_min": round(min(batch_times), 4),
                            "batch_apply_s_max": round(max(batch_times), 4),
                            "transactions_per_batch_client": client_txns / runs,
                            "transactions_per_batch_ovsdb_log": log_txns / runs,
                            "port_rows_per_transaction_ovsdb_log": log_port_rows / max(log_txns, 1),
                            "per_port_apply_total_s": round(per_port_s, 4),
                            "per_port_transactions_ovsdb_log": per_port_txns,
                            "observe_s_median": round(statistics.median(observe_times), 4),  # the whole bridge
                        }
                    )
        finally:
            try:
                ovs.vsctl("--if-exists", "del-br", bridge, timeout=120)
            finally:
                ovs.stop()
    if write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "benchmark": "ethernet_ovsdb",
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "setup": "private ovsdb-server + ovs-vswitchd 3.1 (netdev datapath, own netns), internal ports",
            "rows": rows,
        }
        RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    for r in run_ovsdb():
        print(json.dumps(r))
