"""Benchmark of the pure audit core on synthetic clusters.

Clusters of 512, 1,024 and 4,096 nodes, each with 2 Ethernet ports (one access port in
the tenant's VLAN, one trunk with the tenant's two VLANs) and 8 IB ports (full member of
the tenant's PKey, limited member of the default partition). ~10% of the nodes are in
quarantine, the rest are spread over 20-60 tenants. The desired state equals the clean
observed state; then a fixed handful of violations is injected, and every run checks that
the audit finds exactly those.

Times ``run_audit`` only (indexes + all invariants + sort; building the input is not
timed), median of several runs. The figures that count are *CPU* seconds of this process
(``time.process_time``): the machine is shared (2 cores, other jobs), so wall time is
recorded too but varies with the load (``load_average_1min`` is recorded). Reports time
per node and the growth ratio of time per node between the largest and the smallest
cluster (1.0 = linear; ``linear_ok`` when <= 1.5). Target: <= 1 s for 4,096 nodes.

``core`` rows time what a reconcile/audit pass computes from a store view, over the four
registered fabric kinds (ethernet, infiniband, nvlink, dpu; the synthetic nodes have no GPUs
or DPUs, so those two kinds derive empty slices): ``tenancy_of`` + ``derive_desired`` (as
``MoveEngine.desired``), ``planning.plan.plan`` against the observed state (it must find
exactly the injected drift), and
``run_audit`` with the registry of every kind (each kind's own checks included). Target: <= 1 s at 4,096 nodes, per-node
time <= 1.3x from 512 to 4,096 nodes. The growth is given for the median and for the
fastest run of each size (less sensitive to the other jobs on the machine). Profiled at
512 vs 4,096 nodes every function is called exactly 8x as often, yet per call 1.1-1.4x
slower (even a bare attribute read): memory-hierarchy effects of the larger heap, not an
indexing problem.

Run: ``.venv/bin/python -m bench.bench_audit`` (writes bench/results/audit.json).
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from gpufabric.audit import AuditInput, registry_for, run_audit
from gpufabric.domain.models import Lease, Network, Node
from gpufabric.domain.state import FabricState
from gpufabric.domain.values import Guid, PKey, VlanId
from gpufabric.fabrics.ethernet.entries import EthernetPort, ethernet_ports, with_ethernet
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.ethernet.segments import vlan_segment
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState
from gpufabric.fabrics.infiniband.entries import IbPort, with_ib
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.fabrics.infiniband.plan import IbDesired
from gpufabric.fabrics.infiniband.segments import pkey_segment
from gpufabric.fabrics.infiniband.state import (
    IbFabricState,
    Partition,
    PartitionLayout,
    PartitionMember,
    PkeyTable,
    SmSeen,
    SmState,
)

BUILTIN = registry_for([EthernetKind(), InfinibandKind()])  # the two kinds the synthetic clusters have

SIZES = (512, 1024, 4096)
RUNS = 7
TARGET_SECONDS_4096 = 1.0
RESULTS = Path(__file__).resolve().parent / "results" / "audit.json"
QVLAN = 4000
T0 = datetime(2025, 1, 1, tzinfo=UTC)
SM = Guid(0x0002C90300FF0001)
ROGUE_SM = Guid(0x0002C90300EE0001)
PORTS_PER_LEAF = 32
# the violations injected into every cluster (invariant -> count the audit must report)
EXPECTED = {
    "ETH-VLAN-SHARED": 2,  # node 1's access port moved into tenant 1's VLAN; node 0's (below)
    "X-NODE-SPLIT": 3,  # node 1's access port; node 0's access port and first IB port
    "ETH-UNLEASED-NOT-QUARANTINED": 1,  # node 0 (quarantined): access port left in tenant 0's VLAN
    "IB-GUID-FOREIGN-PKEY": 1,  # node 0's first IB port kept tenant 0's PKey
    "IB-PKEY-SHARED": 1,  # ... shared with tenant 0
    "IB-DEFAULT-FULL-HOST": 1,  # node 2's last IB port is full in the default partition
    "IB-ROGUE-SM": 1,  # a standby SM that is not trusted
    "X-DRIFT": 4,  # node 0 eth + IB port, node 1 eth, node 2 IB port
}


def _guid(node: int, port: int) -> Guid:
    return Guid(0x0002C90300000000 + (node << 4) + port + 1)


@dataclass(frozen=True)
class Cluster:
    inp: AuditInput
    nodes: int
    tenants: int
    quarantined: int
    ports: int


def make_cluster(n: int) -> Cluster:
    """A synthetic cluster of ``n`` nodes (n >= 64) with the EXPECTED violations injected."""
    n_tenants = max(20, min(60, n // 40))
    tenant_of: dict[int, int | None] = {}
    for i in range(n):
        # nodes 0 and every 10th are quarantined; the rest in contiguous blocks per tenant
        tenant_of[i] = None if i % 10 == 0 else (i * n_tenants) // n
    tenants = [f"t{t:02d}" for t in range(n_tenants)]
    networks = tuple(
        Network(f"{name}-net", name, (vlan_segment("ethernet", 2000 + t),
                                      pkey_segment("infiniband", 3000 + t, 0x0A01 + t)))
        for t, name in enumerate(tenants)
    ) + tuple(
        Network(f"{name}-storage", name, (vlan_segment("ethernet", 2500 + t),))
        for t, name in enumerate(tenants)
    )  # fmt: skip
    nodes: list[Node] = []
    leases: list[Lease] = []
    desired_eth: list[EthernetPortConfig] = []
    tables: list[PkeyTable] = []
    members: dict[int, list[PartitionMember]] = {}
    for i in range(n):
        name = f"gpu{i:05d}"
        t = tenant_of[i]
        leaf = f"leaf{i // PORTS_PER_LEAF:03d}"
        eth = tuple(EthernetPort(name, f"eth{k}", leaf, f"Eth1/{2 * (i % PORTS_PER_LEAF) + k + 1}") for k in range(2))
        ib = tuple(IbPort(name, f"mlx5_{k}", 1, _guid(i, k), Guid(_guid(i, k).value | 1 << 48)) for k in range(8))
        nodes.append(with_ib(with_ethernet(Node(name), *eth), *ib))
        if t is None:
            desired_eth += [EthernetPortConfig(leaf, p.switch_port, PortMode.ACCESS, VlanId(QVLAN)) for p in eth]
            tables += [PkeyTable(p.port_guid, (0x7FFF,), 64) for p in ib]
        else:
            leases.append(Lease(tenants[t], name, T0, None, (f"{tenants[t]}-net", f"{tenants[t]}-storage")))
            desired_eth.append(EthernetPortConfig(leaf, eth[0].switch_port, PortMode.ACCESS, VlanId(2000 + t)))
            desired_eth.append(EthernetPortConfig(leaf, eth[1].switch_port, PortMode.TRUNK, VlanId(2000 + t),
                                                  (VlanId(2500 + t),)))  # fmt: skip
            tables += [PkeyTable(p.port_guid, ((0x0A01 + t) | 0x8000, 0x7FFF), 64) for p in ib]
            members.setdefault(t, []).extend(PartitionMember(p.port_guid) for p in ib)
    tables.append(PkeyTable(SM, (0xFFFF,), 64))
    layout = PartitionLayout(
        tuple(Partition(f"{tenants[t]}-net", PKey(0x0A01 + t), tuple(m)) for t, m in sorted(members.items())),
        default_full=(SM,),
    )
    observed_eth = {(c.switch, c.port): c for c in desired_eth}
    obs_tables = {tb.port_guid: tb for tb in tables}
    # ---- injected violations (see EXPECTED)
    n0, n1 = ethernet_ports(nodes[0])[0], ethernet_ports(nodes[1])[0]
    observed_eth[(n0.switch, n0.switch_port)] = EthernetPortConfig(n0.switch, n0.switch_port, PortMode.ACCESS,
                                                                   VlanId(2000))  # fmt: skip
    t1 = tenant_of[11] or 1
    observed_eth[(n1.switch, n1.switch_port)] = EthernetPortConfig(n1.switch, n1.switch_port, PortMode.ACCESS,
                                                                   VlanId(2000 + t1))  # fmt: skip
    obs_tables[_guid(0, 0)] = PkeyTable(_guid(0, 0), (0x8A01, 0x7FFF), 64)
    t2 = tenant_of[2] or 0
    obs_tables[_guid(2, 7)] = PkeyTable(_guid(2, 7), ((0x0A01 + t2) | 0x8000, 0xFFFF), 64)
    sms = (SmSeen(SM, 1, 15, SmState.MASTER, "sm1"), SmSeen(ROGUE_SM, 99, 1, SmState.STANDBY, "rogue"))
    by_switch: dict[str, list[EthernetPortConfig]] = {}
    for c in observed_eth.values():
        by_switch.setdefault(c.switch, []).append(c)
    want_by_switch: dict[str, list[EthernetPortConfig]] = {}
    for c in desired_eth:
        want_by_switch.setdefault(c.switch, []).append(c)
    inp = AuditInput(
        nodes=tuple(nodes),
        leases=tuple(leases),
        networks=networks,
        observed=FabricState(
            tuple(SwitchState(s, tuple(p)) for s, p in by_switch.items()),
            IbFabricState(tuple(obs_tables.values()), sms, SM),
        ),
        settings={"quarantine_vlan": VlanId(QVLAN), "trusted_sm_guids": (SM,), "sm_port_guids": (SM,)},
        desired={"ethernet": tuple(SwitchState(s, tuple(p)) for s, p in want_by_switch.items()),
                 "infiniband": IbDesired(layout, ())},
    )  # fmt: skip
    quarantined = sum(1 for t in tenant_of.values() if t is None)
    return Cluster(inp, n, n_tenants, quarantined, n * 10)


def bench_one(n: int, runs: int = RUNS) -> dict[str, object]:
    cluster = make_cluster(n)
    times = []
    report = None
    cpu_times = []
    for _ in range(runs):
        gc.collect()  # settle the collector after building the input; the audit is not charged for it
        start, cpu_start = time.perf_counter(), time.process_time()
        report = run_audit(cluster.inp, now=T0, registry=BUILTIN)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    assert report is not None
    found = {k: v for k, v in report.counts_by_invariant().items() if v}
    if found != EXPECTED:
        raise AssertionError(f"{n} nodes: audit found {found}, injected {EXPECTED}")
    cpu = statistics.median(cpu_times)
    return {
        "nodes": n,
        "tenants": cluster.tenants,
        "quarantined_nodes": cluster.quarantined,
        "ports": cluster.ports,
        "violations": len(report.violations),
        "runs": runs,
        "median_cpu_seconds": round(cpu, 4),
        "median_wall_seconds": round(statistics.median(times), 4),
        "min_wall_seconds": round(min(times), 4),
        "seconds_per_node": cpu / n,
        "cpu_microseconds_per_node": round(cpu / n * 1e6, 2),
    }


# what the audit must find in the core run (observed = the derived desired state + the drift below)
CORE_EXPECTED = {  # the drift injected by core_observed, as the invariants report it (same at every size)
    "ETH-VLAN-SHARED": 2,  # node 1's access port in tenant t1's VLAN; node 0's left in tenant 0's
    "ETH-UNLEASED-NOT-QUARANTINED": 1,  # node 0 (quarantined) left in tenant 0's VLAN
    "IB-GUID-FOREIGN-PKEY": 1,  # node 0's first IB port kept tenant 0's PKey
    "IB-PKEY-SHARED": 1,  # ... shared with tenant 0
    "IB-DEFAULT-FULL-HOST": 1,  # node 2's last IB port full in the default partition
    "IB-ROGUE-SM": 1,
    "X-NODE-SPLIT": 1,  # node 1: its ports in two tenants' VLANs
    "X-DRIFT": 4,  # the 4 drifted ports
}


def core_observed(c: AuditInput, desired: object, kinds: list[object]) -> FabricState:
    """The derived desired state as the fabrics would read it, with 4 drifted ports."""
    from dataclasses import replace

    from gpufabric.planning.plan import as_observed

    obs = as_observed(kinds, desired)  # type: ignore[arg-type]
    eth = {(p.switch, p.port): p for s in obs.get("ethernet") for p in s.ports}
    n0, n1 = ethernet_ports(c.nodes[0])[0], ethernet_ports(c.nodes[1])[0]
    eth[(n0.switch, n0.switch_port)] = EthernetPortConfig(n0.switch, n0.switch_port, PortMode.ACCESS, VlanId(2000))
    t1 = 1 if c.leases[0].tenant != "t01" else 2
    eth[(n1.switch, n1.switch_port)] = EthernetPortConfig(n1.switch, n1.switch_port, PortMode.ACCESS, VlanId(2000 + t1))
    by_switch: dict[str, list[EthernetPortConfig]] = {}
    for cfg in eth.values():
        by_switch.setdefault(cfg.switch, []).append(cfg)
    ib = obs.get("infiniband")
    tables = {t.port_guid: t for t in ib.tables}
    tables[_guid(0, 0)] = PkeyTable(_guid(0, 0), (0x8A01, 0x7FFF), 64)
    full = tables[_guid(2, 7)]
    tables[_guid(2, 7)] = replace(full, entries=tuple(sorted({*full.entries, 0xFFFF} - {0x7FFF})))
    sms = (SmSeen(SM, 1, 15, SmState.MASTER, "sm1"), SmSeen(ROGUE_SM, 99, 1, SmState.STANDBY, "rogue"))
    return obs.with_slice("ethernet", tuple(SwitchState(s, tuple(sorted(p))) for s, p in sorted(by_switch.items()))).with_slice(
        "infiniband", IbFabricState(tuple(tables[g] for g in sorted(tables)), sms, SM)
    )


def bench_core(n: int, runs: int = RUNS) -> dict[str, object]:
    """derive + plan + audit over the registered kinds (see module doc), CPU seconds."""
    from dataclasses import replace

    from gpufabric.domain.models import BUILTIN_OFFERINGS
    from gpufabric.planning.desired import derive_desired, tenancy_of
    from gpufabric.planning.plan import plan
    from gpufabric.store.registry import Registry

    kinds = Registry.from_entry_points().ordered_kinds()
    registry = registry_for(kinds)
    c = make_cluster(n).inp
    settings = {"quarantine_vlan": QVLAN, "sm_port_guids": (SM,), "trusted_sm_guids": (SM,)}
    observed = core_observed(c, derive_desired(kinds, tenancy_of(c.nodes, c.leases, c.networks, BUILTIN_OFFERINGS, settings)), kinds)  # type: ignore[arg-type]
    c = replace(c, observed=observed)
    parts: dict[str, list[float]] = {"derive": [], "plan": [], "audit": [], "total": []}
    changes = -1
    for _ in range(runs):
        gc.collect()
        t0 = time.process_time()
        desired = derive_desired(kinds, tenancy_of(c.nodes, c.leases, c.networks, BUILTIN_OFFERINGS, settings))
        t1 = time.process_time()
        p = plan(kinds, desired, c.observed)
        t2 = time.process_time()
        inp = AuditInput(
            nodes=c.nodes, leases=c.leases, networks=c.networks, observed=c.observed, settings=settings,
            desired={k.name: desired.get(k.name) for k in kinds}, offerings=BUILTIN_OFFERINGS,
        )  # fmt: skip
        report = run_audit(inp, now=T0, registry=registry)
        t3 = time.process_time()
        for k, v in (("derive", t1 - t0), ("plan", t2 - t1), ("audit", t3 - t2), ("total", t3 - t0)):
            parts[k].append(v)
        changes = len(p)
        lines = p.lines()
    found = {k: v for k, v in report.counts_by_invariant().items() if v}
    if found != CORE_EXPECTED:
        raise AssertionError(f"core {n} nodes: audit found {found}, injected {CORE_EXPECTED}")
    if changes != 5:  # the 4 drifted ports: node 0 eth + IB, node 1 eth, node 2 IB (full -> limited: 2 lines)
        raise AssertionError(f"core {n} nodes: plan has {changes} changes, 4 drifted ports injected: {lines}")
    med = {k: statistics.median(v) for k, v in parts.items()}
    low = min(parts["total"])
    return {
        "case": "core",
        "nodes": n,
        "kinds": [k.name for k in kinds],
        "ports": n * 10,
        "plan_changes": changes,
        "runs": runs,
        **{f"median_cpu_{k}_s": round(v, 4) for k, v in med.items()},
        "min_cpu_total_s": round(low, 4),
        "seconds_per_node": med["total"] / n,
        "cpu_microseconds_per_node": round(med["total"] / n * 1e6, 2),
        "min_cpu_microseconds_per_node": round(low / n * 1e6, 2),
    }


def run_audit_bench(sizes: tuple[int, ...] = SIZES, runs: int = RUNS) -> list[dict[str, object]]:
    """Run every size; write bench/results/audit.json; return one row per size.

    The last row carries the growth check: ``per_node_growth`` = (time/node at the largest
    size) / (time/node at the smallest); ``linear_ok`` when <= 1.5; ``target_ok`` when the
    4,096-node audit takes <= 1 s.
    """
    bench_core(sizes[0], 1)  # warm-up (first calls, imports, allocator): not recorded
    bench_one(sizes[0], 1)
    core = [bench_core(n, runs) for n in sizes]
    cgrowth = float(core[-1]["seconds_per_node"]) / float(core[0]["seconds_per_node"])  # type: ignore[arg-type]
    mgrowth = float(core[-1]["min_cpu_microseconds_per_node"]) / float(core[0]["min_cpu_microseconds_per_node"])  # type: ignore[arg-type]
    core_summary = {
        "core_per_node_growth": round(cgrowth, 3),
        "core_per_node_growth_of_min": round(mgrowth, 3),
        "core_linear_ok": cgrowth <= 1.3,
        "core_target_ok": all(float(r["median_cpu_total_s"]) <= 1.0 for r in core if r["nodes"] == 4096),  # type: ignore[arg-type]
    }
    rows = [bench_one(n, runs) for n in sizes]
    small, large = rows[0], rows[-1]
    growth = float(large["seconds_per_node"]) / float(small["seconds_per_node"])  # type: ignore[arg-type]
    for row in rows:
        row["per_node_growth_vs_smallest"] = round(
            float(row["seconds_per_node"]) / float(small["seconds_per_node"]),  # type: ignore[arg-type]
            3,
        )
    summary = {
        "per_node_growth": round(growth, 3),
        "linear_ok": growth <= 1.5,
        "target_seconds_4096": TARGET_SECONDS_4096,
        "target_ok": all(float(r["median_cpu_seconds"]) <= TARGET_SECONDS_4096 for r in rows if r["nodes"] == 4096),  # type: ignore[arg-type]
        "load_average_1min": round(os.getloadavg()[0], 2),
        **core_summary,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": "audit", "rows": rows, "core_rows": core, "summary": summary}
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    rows[-1] = {**rows[-1], **summary}
    return [*core, *rows]


if __name__ == "__main__":
    for r in run_audit_bench():
        print(json.dumps(r))
