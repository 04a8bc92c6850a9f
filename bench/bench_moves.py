"""Move benchmark on the real lab (ibsim + OpenSM + OVS).

* one-node move (quarantine -> swap -> join, every phase verified) next to the floor
  measured in the same run: one OVSDB transaction for the node's port plus one SM sweep
  verified by SMP reads (``OpenSMDriver.apply`` of a one-GUID change);
* 32 moves requested together (coalesced into one batch) vs one move.

Results: ``bench/results/moves.json``. Run: ``python -m bench.bench_moves``.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from gpufabric.domain.models import QUARANTINE
from gpufabric.domain.segments import SegmentConfig
from gpufabric.domain.state import EthernetPortConfig, Partition, PartitionLayout, PartitionMember, PortMode
from gpufabric.domain.values import PKey, VlanId
from gpufabric.lab.fabrics_config import fabrics_config
from gpufabric.lab.lab import Lab
from gpufabric.service.fabrics import Fabrics
from gpufabric.service.moves import MoveEngine
from gpufabric.service.registry import Registry
from gpufabric.service.store import Store

RESULTS = Path(__file__).parent / "results" / "moves.json"
NODES = 34
RUNS = 3


def _engine(home: Path, lab: Lab) -> MoveEngine:
    st = lab.status()
    cfg = SegmentConfig.default()
    fabrics = Fabrics.from_config(fabrics_config(lab, st, cfg.quarantine_vlan.value), Registry.from_entry_points())
    store = Store.open(url=f"sqlite:///{home / 'bench.db'}")
    store.upsert_inventory(st.inventory())
    return MoveEngine(store, fabrics, cfg, verify_timeout=60)


def _floor(engine: MoveEngine, node: str) -> float:
    """One OVSDB transaction + one SMP-verified SM sweep, for one node's ports."""
    n = engine.store.node(node)
    port = n.ethernet[0]
    sw = engine.fabrics.switches[port.switch]
    assert engine.fabrics.sm is not None
    t0 = time.perf_counter()
    sw.apply([EthernetPortConfig(port.switch, port.switch_port, PortMode.ACCESS, VlanId(2999))])
    layout = PartitionLayout(
        (Partition("bench_floor", PKey(0x0BBB), tuple(PartitionMember(p.port_guid) for p in n.ib)),)
    )
    engine.fabrics.sm.apply(layout)
    seconds = time.perf_counter() - t0
    sw.apply([EthernetPortConfig(port.switch, port.switch_port, PortMode.SHUTDOWN)])
    engine.fabrics.sm.apply(PartitionLayout())
    return seconds


def run_moves_bench(runs: int = RUNS, batch: int = 32) -> list[dict[str, Any]]:
    home = Path(tempfile.mkdtemp(prefix="gf-bench-moves-"))
    lab = Lab(home)
    lab.up(nodes=max(NODES, batch + 2), hcas_per_node=1)
    try:
        engine = _engine(home, lab)
        store = engine.store
        cfg = engine.cfg
        for t in ("alpha", "beta"):
            store.create_tenant(t)
            store.create_network(f"{t}-net", t, cfg)
        floors, singles = [], []
        for i in range(runs):
            floors.append(_floor(engine, "gpu-a01"))
            target = "alpha" if i % 2 == 0 else "beta"
            t0 = time.perf_counter()
            engine.ledger.request("gpu-a01", target, "baremetal", (f"{target}-net",))
            engine.run_pending()
            singles.append(time.perf_counter() - t0)
        nodes = [f"gpu-a{i:02d}" for i in range(2, batch + 2)]
        t0 = time.perf_counter()
        for name in nodes:
            engine.ledger.request(name, "alpha", "baremetal", ("alpha-net",))
        result = engine.run_pending(limit=batch)
        batch_s = time.perf_counter() - t0
        assert result is not None and len(result.moves) == batch and all(m.finished for m in result.moves)
        for name in nodes:  # back to quarantine, also as one batch
            engine.ledger.request(name, QUARANTINE)
        engine.run_pending(limit=batch)
        floor, single = statistics.median(floors), statistics.median(singles)
        rows = [
            {"case": "floor: 1 OVSDB txn + 1 verified SM sweep", "seconds": round(floor, 3), "runs": runs},
            {
                "case": "one-node move (3 phases, verified)",
                "seconds": round(single, 3),
                "runs": runs,
                "ratio_to_floor": round(single / floor, 2),
            },
            {
                "case": f"{batch} moves in one coalesced batch",
                "seconds": round(batch_s, 3),
                "ratio_to_one_move": round(batch_s / single, 2),
                "per_move_seconds": round(batch_s / batch, 3),
                "speedup_vs_serial": round(batch * single / batch_s, 1),
            },
        ]
    finally:
        lab.down()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"nodes": NODES, "cpus": os.cpu_count(), "rows": rows}, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    for row in run_moves_bench():
        print(row)
