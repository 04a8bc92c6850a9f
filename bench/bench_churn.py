"""Sustained churn: move requests arriving continuously through a warm worker.

A 1,000-HCA fabric (500 nodes x 2 HCAs, :mod:`bench.benchlab`); ``MOVERS`` nodes start leased
to tenants ``t0``..``t3``. For ``duration`` seconds (default 300; ``GF_CHURN_SECONDS``):

* a requester thread (its own store connection, as the API or CLI would be) asks for
  ``rate`` moves per second (default 6 = 360/min, more than the target so that the worker is
  never idle; Poisson arrivals), each of a random mover with no open move, to another tenant;
* the worker (this thread) loops ``MoveEngine.run_pending(window, limit=64)`` (idle: again after ``window``) on ONE
  long-lived engine, as ``gpufabric serve`` does;
* an independent sampler thread reads the fabrics with the operators' tools, not with
  gpufabric's drivers: ``ovs-vsctl list Port`` (every bridge) and ``smpquery pkeys`` of the
  HCAs of 8 random movers per round, then ``ovs-vsctl`` again; a node is split when both
  OVS reads put its Ethernet port in tenant A and an HCA holds tenant B's PKey (a node seen
  with two tenants' resources at once). Violations are recorded, not asserted.

Reported: completed moves/minute (target >= 200), p50/p95/max latency from request to
done, batches and their sizes, sampler rounds and violations, and a full audit at the end
(must be clean). Load average is recorded (shared machine: numbers are noisy).

Run: ``python -m bench.bench_churn [seconds]`` (writes bench/results/churn.json).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpufabric.domain.errors import ConflictError
from gpufabric.domain.moves import MoveRequest
from gpufabric.engine.audit_run import audit
from gpufabric.engine.moves import MoveEngine
from gpufabric.fabrics.ethernet.entries import ethernet_ports
from gpufabric.fabrics.ethernet.segments import segment_vlan
from gpufabric.fabrics.infiniband.entries import all_ib_ports
from gpufabric.fabrics.infiniband.readers.diags import parse_smpquery_pkeys
from gpufabric.fabrics.infiniband.segments import segment_pkey
from gpufabric.lab.netfile import SM_NODE
from gpufabric.store.core import Store
from gpufabric.store.moves import MoveLedger

from bench.benchlab import BenchFabric, loadavg, start

RESULTS = Path(__file__).parent / "results" / "churn.json"
NODES, HCAS = 500, 2
MOVERS = 200
TENANTS = ("t0", "t1", "t2", "t3")
QVLAN = 4000


class Sampler(threading.Thread):
    """Reads OVS and SMP tables with ovs-vsctl / smpquery; records nodes seen split."""

    def __init__(self, fab: BenchFabric, movers: list[str], vlans: dict[int, str], pkeys: dict[int, str]) -> None:
        super().__init__(name="churn-sampler", daemon=True)
        self.fab, self.vlans, self.pkeys = fab, vlans, pkeys
        self.nodes = {n.name: n for n in fab.nodes if n.name in set(movers)}
        self.stop = threading.Event()
        self.rounds = 0
        self.violations: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.lids: dict[str, tuple[int, int]] = {}

    def _ovs(self) -> dict[str, str]:
        out = self.fab.ovs.vsctl("--format=json", "--columns=name,tag,trunks", "list", "Port")
        doc = json.loads(out)
        owner: dict[str, str] = {}
        for name, tag, trunks in doc["data"]:
            vl = [tag] if isinstance(tag, int) else []
            if isinstance(trunks, list) and trunks[0] == "set":
                vl += trunks[1]
            elif isinstance(trunks, int):
                vl.append(trunks)
            ts = {self.vlans.get(v, "?") for v in vl if v != QVLAN}
            owner[name] = ",".join(sorted(ts)) or "quarantine"
        return owner

    def _pkeys(self, guid: str) -> set[str]:
        lid, port = self.lids[guid]
        text = self.fab.ib.run_tool(["smpquery", "pkeys", str(lid), str(port)], sim_host=SM_NODE)
        keys = {e & 0x7FFF for e in parse_smpquery_pkeys(text).entries if e & 0x7FFF != 0x7FFF}
        return {self.pkeys.get(k, f"pkey:{k:#x}") for k in keys}

    def run(self) -> None:
        from gpufabric.fabrics.infiniband.readers.ibnetdiscover import ca_ports, parse_ibnetdiscover

        topo = parse_ibnetdiscover(self.fab.ib.run_tool(["ibnetdiscover", "-p"], sim_host=SM_NODE, timeout=120))
        self.lids = {str(g): (p.lid, p.port_num) for g, p in ca_ports(topo).items()}
        rng = random.Random(7)
        names = sorted(self.nodes)
        while not self.stop.is_set():
            try:
                before = self._ovs()
                pick = rng.sample(names, 8)
                ib = {n: set().union(*(self._pkeys(str(p.port_guid)) for p in all_ib_ports(self.nodes[n]))) for n in pick}
                after = self._ovs()
            except Exception as e:  # the sampler must not die: record and go on
                self.errors.append(str(e)[:200])
                continue
            self.rounds += 1
            for n in pick:
                port = ethernet_ports(self.nodes[n])[0].switch_port
                eth = before.get(port)
                if eth is None or eth != after.get(port) or eth == "quarantine":
                    continue
                other = ib[n] - {eth}
                if other or "," in eth:
                    self.violations.append({"node": n, "ethernet": eth, "infiniband": sorted(ib[n])})


def run_churn(duration: float | None = None, rate: float = 6.0, window: float = 0.2) -> dict[str, Any]:
    duration = float(duration or os.environ.get("GF_CHURN_SECONDS", 300))
    with tempfile.TemporaryDirectory(prefix="gf-bench-churn-") as tmp:
        fab = start(Path(tmp), NODES, HCAS)
        eng: MoveEngine = fab.engine()
        try:
            return _run(fab, eng, duration, rate, window)
        finally:
            eng.fabrics.close()
            fab.stop()


def _run(fab: BenchFabric, eng: MoveEngine, duration: float, rate: float, window: float) -> dict[str, Any]:
    nets = {}
    for t in TENANTS:
        eng.store.create_tenant(t)
        nets[t] = eng.store.create_network(f"{t}-net", t, eng.cfg, eng.kinds)
    vlans = {segment_vlan(s).value: t for t, n in nets.items() for s in n.segments if segment_vlan(s)}
    pkeys = {segment_pkey(s).value & 0x7FFF: t for t, n in nets.items() for s in n.segments if segment_pkey(s)}
    movers = [n.name for n in fab.nodes[:MOVERS]]
    where = {n: TENANTS[i % len(TENANTS)] for i, n in enumerate(movers)}
    for n in movers:
        eng.ledger.request(n, MoveRequest(where[n], "baremetal", (f"{where[n]}-net",)))
    t0 = time.monotonic()
    while eng.run_pending(limit=MOVERS) is not None:
        pass
    setup_moves_s = time.monotonic() - t0
    requested: dict[int, float] = {}
    busy: set[str] = set()
    lock = threading.Lock()
    stop = threading.Event()

    ledger = MoveLedger(Store.open(home=fab.home))  # the requests come from elsewhere (API, CLI)

    def requester() -> None:
        rng = random.Random(1)
        while not stop.is_set():
            time.sleep(rng.expovariate(rate))
            with lock:
                free = [n for n in movers if n not in busy]
            if not free:
                continue
            n = rng.choice(free)
            to = rng.choice([t for t in TENANTS if t != where[n]])
            try:
                m = ledger.request(n, MoveRequest(to, "baremetal", (f"{to}-net",)))
            except ConflictError:
                continue
            with lock:
                busy.add(n)
                where[n] = to
                requested[m.id] = time.monotonic()

    sampler = Sampler(fab, movers, vlans, pkeys)
    sampler.start()
    req = threading.Thread(target=requester, name="churn-requester", daemon=True)
    latencies: list[float] = []
    batches: list[int] = []
    phases: list[dict[str, Any]] = []
    failed = 0
    start_t = time.monotonic()
    req.start()
    while time.monotonic() - start_t < duration:
        res = eng.run_pending(window=window, limit=64)
        if res is None:  # idle: poll again after the window (this worker has no wake)
            time.sleep(window)
            continue
        now = time.monotonic()
        batches.append(len(res.moves))
        if len(phases) < 200:
            phases.append({t.phase: round(t.seconds, 2) for t in res.timings}
                          | {"observed_first": any(t.observed_first for t in res.timings), "moves": len(res.moves),
                             "devices": {k: round(v, 2) for t in res.timings for k, v in t.applied.items()}})  # fmt: skip
        with lock:
            for m in res.moves:
                busy.discard(m.node)
                if m.finished and m.id in requested:
                    latencies.append(now - requested.pop(m.id))
                elif not m.finished or m.error:
                    failed += 1
    elapsed = time.monotonic() - start_t
    stop.set()
    req.join(timeout=10)
    while eng.run_pending(limit=64) is not None:  # drain
        pass
    sampler.stop.set()
    sampler.join(timeout=60)
    report = audit(eng)
    lat = sorted(latencies)
    q = statistics.quantiles(lat, n=20) if len(lat) >= 20 else [float("nan")] * 19
    return {
        "hcas": NODES * HCAS, "nodes": NODES, "movers": MOVERS, "tenants": len(TENANTS),
        "duration_s": round(elapsed, 1), "arrival_rate_per_s": rate, "window_s": window,
        "setup_s": round(fab.setup_seconds, 1), "initial_leases_s": round(setup_moves_s, 2),
        "requested": len(lat) + len(requested) + failed, "completed": len(lat), "failed": failed,
        "moves_per_minute": round(len(lat) / elapsed * 60, 1), "target_moves_per_minute": 200,
        "latency_p50_s": round(statistics.median(lat), 3) if lat else None,
        "latency_p95_s": round(q[18], 3), "latency_max_s": round(lat[-1], 3) if lat else None,
        "batches": len(batches), "batch_size_mean": round(statistics.mean(batches), 1) if batches else 0,
        "batch_size_max": max(batches, default=0),
        "batch_phase_seconds_median": {k: round(statistics.median(p[k] for p in phases if k in p), 3)
                                       for k in ("quarantine", "swap", "join") if any(k in p for p in phases)},
        "batches_that_observed_first": sum(1 for p in phases if p["observed_first"]),
        "batch_phases_first": phases[:5],
        "sampler_rounds": sampler.rounds, "sampler_nodes_checked": sampler.rounds * 8,
        "sampler_split_violations": len(sampler.violations), "violations": sampler.violations[:10],
        "sampler_errors": sampler.errors[:5],
        "audit_violations_end": len(report.violations), "audit_clean": not report.violations,
        "audit_first": [str(v.message) for v in report.violations[:5]],
        "loadavg_end": loadavg(),
    }  # fmt: skip


def run_churn_bench() -> list[dict[str, Any]]:
    row = {"benchmark": "churn", "date": datetime.now(UTC).isoformat(timespec="seconds"), "loadavg_start": loadavg(),
           **run_churn()}  # fmt: skip
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(row, indent=2) + "\n")
    return [row]


if __name__ == "__main__":
    if sys.argv[1:]:
        os.environ["GF_CHURN_SECONDS"] = sys.argv[1]
    for r in run_churn_bench():
        print(json.dumps(r))
