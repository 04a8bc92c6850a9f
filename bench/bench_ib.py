"""Benchmark of the OpenSM driver on real ibsim + OpenSM 3.3.23.

For fabrics of 100 / 500 / 1,000 HCAs (lab net file generator, 2 HCAs per node, 10 nodes
per tenant partition):

- ``initial``: first apply of the whole layout (every port affected): reload -> SUBNET UP
  (``sweep_s``), then every port's PKey table read back by SMP (``verify_s``);
- ``move``: one node (2 HCAs) moved between tenants as the two verified steps (remove, then
  add): time of each step, HUP -> verified;
- ``observe``: full SMP observation (PKey table + PortInfo of every CA port, SMInfo);
- on the largest fabric: 32 node moves applied as ONE batch (one HUP, one verification of
  the 64 affected ports) vs the same 32 moves applied one by one (32 HUPs).

The driver reads SMPs with the batch reader (``reader="batch"``: one process, one
libibmad port); for comparison ``readers`` times the same reads with the per-process
``smpquery`` fallback (8 workers): a full observe, the read-back of every port after the
initial HUP (``verify_all``: what ``initial.verify_s`` pays once the tables are right),
and one node move (remove + add, HUP -> verified). ``loadavg`` is the 1-minute load when
the size started (other jobs share the machine's 2 cores).

Run: ``.venv/bin/python -m bench.bench_ib`` (writes bench/results/ib.json).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from gpufabric.domain.values import Guid, PKey
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMConfig, OpenSMDriver
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember
from gpufabric.fabrics.infiniband.state.partitions import check_layout
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.netfile import SM_NODE, generate_netfile, hca_port_guid

RESULTS = Path(__file__).parent / "results" / "ib.json"
HCAS_PER_NODE = 2
NODES_PER_TENANT = 10


def layout_for(assign: dict[int, int], nodes: int) -> PartitionLayout:
    """Tenant t gets PKey 0x0100 + t; node n's HCAs go where ``assign[n]`` says."""
    members: dict[int, list[Guid]] = {}
    for n in range(1, nodes + 1):
        members.setdefault(assign[n], []).extend(hca_port_guid(n, h) for h in range(HCAS_PER_NODE))
    return PartitionLayout(
        tuple(
            Partition(f"tenant-{t:03d}", PKey(0x0100 + t), tuple(PartitionMember(g) for g in sorted(gs)))
            for t, gs in sorted(members.items())
        )
    )


def timed(fn: Callable[[], object]) -> float:
    t = time.monotonic()
    fn()
    return time.monotonic() - t


def bench_size(hcas: int, batch: bool) -> dict[str, Any]:
    nodes = hcas // HCAS_PER_NODE
    with tempfile.TemporaryDirectory(prefix="gf-bench-ib-") as tmp:
        fab = IbFabric(Path(tmp), f"gf-bench-ib-{os.getpid()}-{hcas}", SM_NODE)
        drv, fallback = driver(fab, "batch"), driver(fab, "smpquery")
        try:
            fab.start_ibsim(generate_netfile(nodes, HCAS_PER_NODE))
            fab.start_opensm(timeout=180)
            loadavg = round(os.getloadavg()[0], 1)
            discover_s = timed(lambda: drv.ports(refresh=True))
            assign = {n: (n - 1) // NODES_PER_TENANT for n in range(1, nodes + 1)}
            tenants = max(assign.values()) + 1
            total = timed(lambda: drv.apply(layout_for(assign, nodes)))
            r0 = drv.last_report
            row: dict[str, Any] = {
                "hcas": hcas,
                "loadavg": loadavg,
                "nodes": nodes,
                "tenants": tenants,
                "discover_s": round(discover_s, 3),
                "initial": {
                    "ports_verified": r0.ports_checked,
                    "sweep_s": round(r0.sweep_seconds, 3),
                    "verify_s": round(r0.verify_seconds, 3),
                    "total_s": round(total, 3),
                },
            }
            # one node moved: remove (verified), then add (verified)
            n = 1
            dst = (assign[n] + 1) % tenants
            assign.pop(n)
            removed = {**assign, n: 10_000}  # parked in a partition of its own: out of both tenants
            step1 = timed(lambda: drv.apply(layout_for(removed, nodes)))
            r1 = drv.last_report
            assign[n] = dst
            step2 = timed(lambda: drv.apply(layout_for(assign, nodes)))
            r2 = drv.last_report
            row["move"] = {
                "remove_s": round(step1, 3),
                "remove_sweep_s": round(r1.sweep_seconds, 3),
                "remove_ports_verified": r1.ports_checked,
                "add_s": round(step2, 3),
                "add_sweep_s": round(r2.sweep_seconds, 3),
                "add_ports_verified": r2.ports_checked,
            }
            row["observe_s"] = round(timed(drv.observe), 3)
            row["readers"] = compare_readers(drv, fallback, layout_for(assign, nodes), assign, nodes, tenants)
            if batch:
                movers = list(range(2, 2 + 32 * NODES_PER_TENANT, NODES_PER_TENANT))[:32]
                movers = [m for m in movers if m <= nodes]
                after = dict(assign)
                for m in movers:
                    after[m] = (assign[m] + 1) % tenants
                one = timed(lambda: drv.apply(layout_for(after, nodes)))
                rb = drv.last_report
                cur = dict(after)
                hups = 0

                def one_by_one() -> None:
                    nonlocal hups
                    for m in movers:
                        cur[m] = (cur[m] + 1) % tenants
                        drv.apply(layout_for(cur, nodes))
                        hups += drv.last_report.reloads

                many = timed(one_by_one)
                row["batch32"] = {
                    "moves": len(movers),
                    "one_hup_s": round(one, 3),
                    "one_hup_ports_verified": rb.ports_checked,
                    "one_hup_reloads": rb.reloads,
                    "per_move_hups_s": round(many, 3),
                    "per_move_reloads": hups,
                    "speedup": round(many / one, 1) if one else None,
                }
            return row
        finally:
            drv.close()
            fab.stop()


def driver(fab: IbFabric, reader: str) -> OpenSMDriver:
    return OpenSMDriver(
        OpenSMConfig(
            partitions_conf=fab.partitions_conf,
            log_path=fab.opensm_log,
            pid_file=fab.run_dir / "opensm.pid",
            trusted_sm_guids=(hca_port_guid(0, 0),),
            diag_env=tuple(sorted(fab.tool_env(SM_NODE, base={}).items())),
            diag_cwd=fab.scratch,
            sweep_timeout=180,
            verify_timeout=120,
            reader=reader,
        )
    )


def compare_readers(
    drv: OpenSMDriver, fallback: OpenSMDriver, layout: PartitionLayout, assign: dict[int, int], nodes: int, tenants: int
) -> dict[str, Any]:
    """The same reads through both readers (tables already as ``layout`` says)."""
    ports = list(drv.ports().values())
    norm = check_layout(layout, drv.config.trusted_sm_guids)
    out: dict[str, Any] = {}
    for name, d in (("batch", drv), ("smpquery", fallback)):
        d.ports(refresh=True)
        observe = timed(d.observe)
        verify_all = timed(partial(d.verify, norm, ports))
        n, cur = 2, dict(assign)
        dst = (cur[n] + 1) % tenants
        cur[n] = 10_000
        remove = timed(partial(d.apply, layout_for(cur, nodes)))
        cur[n] = dst
        add = timed(partial(d.apply, layout_for(cur, nodes)))
        d.apply(layout)  # back
        out[name] = {
            "observe_s": round(observe, 3),
            "verify_all_s": round(verify_all, 3),
            "verify_all_ports": len(ports),
            "move_remove_s": round(remove, 3),
            "move_add_s": round(add, 3),
        }
    b, s = out["batch"], out["smpquery"]
    out["speedup_observe"] = round(s["observe_s"] / b["observe_s"], 1) if b["observe_s"] else None
    out["speedup_verify_all"] = round(s["verify_all_s"] / b["verify_all_s"], 1) if b["verify_all_s"] else None
    return out


def run_ib_bench(sizes: tuple[int, ...] = (100, 500, 1000)) -> list[dict[str, Any]]:
    rows = [bench_size(s, batch=(s == max(sizes))) for s in sizes]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {"benchmark": "ib_opensm", "date": datetime.now(UTC).isoformat(timespec="seconds"), "rows": rows},
            indent=2,
        )
        + "\n"
    )
    return rows


if __name__ == "__main__":
    for r in run_ib_bench():
        print(json.dumps(r))
