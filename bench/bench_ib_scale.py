"""One move and 32 coalesced moves at 4,096 and 16,384 HCAs on ibsim (nodes x 8 HCAs), against
the floor measured in the same run (issue 20).

A move through the OpenSM driver is its two verified steps (the node's HCAs removed from the
old tenant's partition, then added to the new one's): per step the driver renders
partitions.conf, checks it, writes it atomically, HUPs OpenSM, waits for SUBNET UP in its log
and reads every affected port's PKey table back by SMP (the batch reader) until it holds.

**Floor**: the same two partitions files (the driver's own rendering, made before the clock
starts) written straight to partitions.conf, HUP, SUBNET UP, and one SMP read of the moved
ports' PKey tables: the physical minimum of the same work through the same SM path. It
excludes gpufabric's planning, layout checks, IPoIB budget check, file locking, the
last-good copy and retries; its SMP reader is kept warm during the sweep as the driver's is
(a sweep at 4,096 HCAs outlasts the reader process's 5 s idle exit: neither pays a start).

``coalesced32``: 32 nodes moved in the same two steps (one HUP each) vs ``move`` (target
<= 2x); ``move_vs_floor`` (target <= 1.5x). Each is measured ``GF_IB_SCALE_REPEATS`` times
(3 up to 4,096 HCAs, else 1), move and floor in turn: ``s``/``floor_s`` are medians,
``vs_floor`` the median of the per-run ratios, ``runs`` the (move, floor) pairs. The fabric's PKey tables are read back whole
(``observe_s``) once. If a size cannot run here (ibsim, OpenSM's sweep, memory), its row says
why and where the time went.

Run: ``.venv/bin/python -m bench.bench_ib_scale [HCAS ...]`` (writes bench/results/ib_scale.json).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpufabric.domain.values import Guid, PKey
from gpufabric.fabrics.infiniband.drivers.opensm.config import OpenSMConfig
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMDriver
from gpufabric.fabrics.infiniband.drivers.opensm.files import atomic_write, read_from, size
from gpufabric.fabrics.infiniband.drivers.opensm.smpread import keep_warm
from gpufabric.fabrics.infiniband.readers.diags import parse_opensm_log
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.netfile import MAX_HCAS, MAX_NODES, SM_NODE, generate_netfile, hca_port_guid

RESULTS = Path(__file__).parent / "results" / "ib_scale.json"
HCAS_PER_NODE = 8
NODES_PER_TENANT = 16
LEAF_PORTS = 128  # 16 nodes x 8 HCAs per leaf; 36-port leaves would need > 254 leaves under one spine tier
PARKED = 10_000  # a node between the two steps: in a partition of its own, out of both tenants


def shape(hcas: int) -> tuple[int, int, int, int]:
    """(nodes, HCAs per node, leaf ports, nodes per leaf; 0: the generator's) of a size:
    nodes x 8 on LEAF_PORTS-port leaves up to 4,096 HCAs; past that, nodes x 8 on 254-port leaves,
    15 nodes each (16,384 HCAs: 2,048 nodes on 137 leaves; the generator's spines hold 254 leaves),
    and past the net file generator's MAX_NODES, MAX_NODES nodes x 16 HCAs at most."""
    nodes = hcas // HCAS_PER_NODE
    if nodes <= 4096 // HCAS_PER_NODE:
        return nodes, HCAS_PER_NODE, LEAF_PORTS, 0
    if nodes <= MAX_NODES:
        return nodes, HCAS_PER_NODE, 254, (254 // 2 - 1) // HCAS_PER_NODE
    return min(MAX_NODES, hcas // MAX_HCAS), MAX_HCAS, 254, (254 // 2 - 1) // MAX_HCAS


def layout_for(assign: dict[int, int], per: int = HCAS_PER_NODE) -> PartitionLayout:
    members: dict[int, list[Guid]] = {}
    for n, t in assign.items():
        members.setdefault(t, []).extend(hca_port_guid(n, h) for h in range(per))
    return PartitionLayout(tuple(
        Partition(f"t{t:05d}", PKey(0x0100 + (t % 0x7000)), tuple(PartitionMember(g) for g in sorted(gs)))
        for t, gs in sorted(members.items())))  # fmt: skip


def timed(fn: Callable[[], object]) -> float:
    t = time.monotonic()
    fn()
    return time.monotonic() - t


def driver(fab: IbFabric) -> OpenSMDriver:
    return OpenSMDriver(OpenSMConfig(
        partitions_conf=fab.partitions_conf, log_path=fab.opensm_log, pid_file=fab.run_dir / "opensm.pid",
        trusted_sm_guids=(hca_port_guid(0, 0),), diag_env=tuple(sorted(fab.tool_env(SM_NODE, base={}).items())),
        diag_cwd=fab.scratch, sweep_timeout=900, verify_timeout=600, reader="batch"))  # fmt: skip


def steps(
    assign: dict[int, int], movers: list[int], tenants: int, per: int = HCAS_PER_NODE
) -> tuple[PartitionLayout, PartitionLayout, dict[int, int]]:
    parked = {**assign, **{m: PARKED for m in movers}}
    after = {**assign, **{m: (assign[m] + 1) % tenants for m in movers}}
    return layout_for(parked, per), layout_for(after, per), after


def floor(drv: OpenSMDriver, fab: IbFabric, texts: tuple[str, str], guids: list[Guid]) -> float:
    """Write, HUP, SUBNET UP, one SMP read of the moved ports: per step, summed."""
    total = 0.0
    for text in texts:
        t0 = time.monotonic()
        offset = size(fab.opensm_log)
        atomic_write(fab.partitions_conf, text)
        drv.reload()
        while not parse_opensm_log(read_from(fab.opensm_log, offset)).subnet_up:
            keep_warm(drv.reader)
            time.sleep(0.01)
        drv.tables(guids)
        total += time.monotonic() - t0
    return total


def bench_size(hcas: int) -> dict[str, Any]:
    asked, (nodes, per, leaf_ports, per_leaf) = hcas, shape(hcas)
    hcas = nodes * per
    repeats = int(os.environ.get("GF_IB_SCALE_REPEATS", "3" if hcas <= 4096 else "1"))
    row: dict[str, Any] = {"hcas": hcas, "nodes": nodes, "leaf_ports": leaf_ports, "loadavg": round(os.getloadavg()[0], 1),
                          "repeats": repeats, "hcas_per_node": per} | ({"hcas_asked": asked} if asked != hcas else {})  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="gf-bench-ibscale-") as tmp:
        fab = IbFabric(Path(tmp), f"gf-ibscale-{os.getpid()}-{hcas}", SM_NODE)
        drv = driver(fab)
        phase = "ibsim"
        try:
            t0 = time.monotonic()
            # two tiers as ibsim models them: leaves of LEAF_PORTS ports (half down, half up) under spines
            fab.start_ibsim(generate_netfile(nodes, per, leaf_ports=leaf_ports, nodes_per_leaf=per_leaf),
                            max_nodes=max(2 * nodes, hcas) + 4096, max_ports=4 * hcas + 65536)
            row["ibsim_start_s"] = round(time.monotonic() - t0, 1)
            phase = "opensm first sweep"
            row["opensm_start_s"] = round(timed(lambda: fab.start_opensm(timeout=1800)), 1)
            phase = "discover"
            row["discover_s"] = round(timed(lambda: drv.ports(refresh=True)), 2)
            assign = {n: (n - 1) // NODES_PER_TENANT for n in range(1, nodes + 1)}
            tenants = max(assign.values()) + 1
            row["tenants"] = tenants
            phase = "initial apply"
            row["initial_s"] = round(timed(lambda: drv.apply(layout_for(assign, per))), 2)
            phase = "observe"
            row["observe_s"] = round(timed(drv.observe), 2)
            for label, movers in (("move", [1]), ("coalesced32", list(range(2, nodes + 1, max(1, nodes // 32)))[:32])):
                phase = label
                parked, after, assign_after = steps(assign, movers, tenants, per)
                guids = [hca_port_guid(m, h) for m in movers for h in range(per)]
                runs = []
                for _ in range(repeats):  # move, then its floor, in turn: the same load for both
                    t0 = time.monotonic()
                    drv.apply(parked)
                    drv.apply(after)
                    t = time.monotonic() - t0
                    # the floor of the same work: back to where we were, then the same two files by hand
                    drv.apply(steps(assign_after, movers, tenants, per)[0])
                    drv.apply(layout_for(assign, per))
                    f = floor(drv, fab, (drv.render(parked), drv.render(after)), guids)
                    drv.apply(layout_for(assign, per))  # the driver's own state again (it verified the floor's files)
                    runs.append((round(t, 3), round(f, 3)))
                row[label] = {
                    "moves": len(movers), "ports": len(movers) * per,
                    "s": statistics.median(t for t, _ in runs), "floor_s": statistics.median(f for _, f in runs),
                    "vs_floor": round(statistics.median(t / f for t, f in runs), 2), "runs": runs,
                }  # fmt: skip
            row["coalesced32_vs_move"] = round(row["coalesced32"]["s"] / row["move"]["s"], 2)
        except Exception as e:  # a size that cannot run here says where it stopped, and why
            row["failed_at"] = phase
            row["error"] = f"{type(e).__name__}: {e}"[:500]
            traceback.print_exc()
        finally:
            drv.close()
            fab.stop()
    return row


def run_ib_scale_bench(sizes: tuple[int, ...] = (4096, 16384)) -> list[dict[str, Any]]:
    rows = []
    for s in sizes:
        print(f"ib scale: {s} HCAs ...", file=sys.stderr, flush=True)
        rows.append(bench_size(s))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "ib_scale", "date": datetime.now(UTC).isoformat(timespec="seconds"),
                                   "rows": rows}, indent=2) + "\n")  # fmt: skip
    return rows


def main(argv: list[str]) -> int:
    run_ib_scale_bench(tuple(int(a) for a in argv) or (4096, 16384))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
