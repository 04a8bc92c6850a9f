"""API v1 benchmark on SQLite, one store, one run, a real ``gpufabric serve`` (uvicorn) on
loopback and a load client of persistent HTTP/1.1 connections (``http.client``, threads):

* reads of a 100-node page (``GET /api/v1/nodes?limit=100``), target >= 1,000/s;
* full-list reads at 400 nodes (``GET /api/v1/nodes?limit=1000``, ~0.8 MB), target >= 50/s;
* lease writes (``POST /api/v1/leases``: a grant through the one tenancy workflow — the durable
  move from quarantine and its event, answered 202 — on the free nodes, scheduled), target >= 200/s.
  A node holds one open move, so writes run in rounds of one per free node; between rounds the
  pending grants are dropped straight in the database (not timed);
* each also without the revision cache (a write between reads): the build cost of one answer.

The store: 400 nodes x 2 Ethernet ports, 8 IB ports, 8 GPUs; 300 active leases (the shape
the issue measured). Results: ``bench/results/api.json``. Run: ``python -m bench.bench_api``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.models import Lease
from gpufabric.lab.serve import serving
from gpufabric.store.core import Store
from gpufabric.store.registry import parse_segments
from gpufabric.workflow.actions import Actions
from gpufabric.workflow.inventory import inventory_from_dict

RESULTS = Path(__file__).parent / "results" / "api.json"
NODES, LEASES, CLIENTS, SECONDS = 400, 300, 4, 4.0
TARGETS = {"page100_reads_per_s": 1000.0, "full400_reads_per_s": 50.0, "lease_writes_per_s": 200.0}


def _inventory(n: int) -> dict[str, Any]:
    return {
        "version": 1,
        "nodes": [
            {
                "name": f"gpu-{i:04d}",
                "ethernet": [{"name": f"eth{e}", "switch": f"leaf-{e}-{i // 48}", "switch_port": f"Ethernet{i % 48 + 1}"}
                             for e in range(2)],
                "ib": [{"device": f"mlx5_{j}", "port_num": 1, "port_guid": f"0x0002c903{i:04x}{j:04x}",
                        "node_guid": f"0x0002c904{i:04x}{j:04x}"} for j in range(8)],
                "gpus": [{"module_id": g + 1} for g in range(8)],
            }
            for i in range(n)
        ],
    }


def _setup(url: str) -> str:
    store = Store.open(url)
    act = Actions(store, parse_segments)
    act.import_inventory(LOCAL_ADMIN, inventory_from_dict(_inventory(NODES)))
    for t in ("alpha", "beta", "gamma"):
        act.create_tenant(LOCAL_ADMIN, t)
        act.create_network(LOCAL_ADMIN, f"{t}-net", t)
    now = datetime.now(UTC)
    for i in range(LEASES):  # fixture data: leases as a finished move leaves them (not timed)
        t = ("alpha", "beta", "gamma")[i % 3]
        store.create_lease(Lease(t, f"gpu-{i:04d}", now, None, (f"{t}-net",)))
    secret = act.create_token(LOCAL_ADMIN, "bench", "admin", None)[1]
    store.close()
    return secret


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load(ports: list[int], token: str, request: Callable[[int, int], tuple[str, str, bytes | None] | None], seconds: float,
          clients: int) -> dict[str, Any]:
    """``clients`` threads, each a persistent connection, for ``seconds``: answers/s and latency."""
    stop = time.monotonic() + seconds
    lat: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def worker(w: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", ports[w % len(ports)], timeout=30)
        mine: list[float] = []
        k = 0
        while time.monotonic() < stop:
            req = request(w, k)
            if req is None:  # this round has no more work
                break
            method, path, body = req
            k += 1
            t0 = time.perf_counter()
            conn.request(method, path, body=body, headers={"Authorization": f"Bearer {token}",
                                                             "Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            mine.append(time.perf_counter() - t0)
            if resp.status >= 300:
                errors.append(f"{resp.status} {data[:200]!r}")
        conn.close()
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    lat.sort()
    return {
        "requests": len(lat),
        "per_s": round(len(lat) / wall, 1),
        "p50_ms": round(statistics.median(lat) * 1000, 2) if lat else None,
        "p99_ms": round(lat[int(len(lat) * 0.99) - 1] * 1000, 2) if lat else None,
        "errors": len(errors),
        "first_error": errors[0] if errors else "",
    }


def run_api_bench() -> list[dict[str, Any]]:
    home = Path(tempfile.mkdtemp(prefix="gf-bench-api-"))
    url = f"sqlite:///{home}/gpufabric.db"
    t0 = time.monotonic()
    token = _setup(url)
    setup_s = time.monotonic() - t0
    rows, measured = _cases(home, [url], token)
    summary = _summary(f"SQLite, one server process; setup {setup_s:.1f}s", measured)
    out: dict[str, Any] = {"benchmark": "api", "rows": rows, "summary": summary}
    pg_rows: list[dict[str, Any]] = []
    if os.environ.get("BENCH_API_PG", "1") != "0":
        from bench.pg import postgres

        with postgres() as pg_url:
            token = _setup(pg_url)
            pg_rows, pg_measured = _cases(home, [pg_url, pg_url], token)
            out["postgresql_two_processes"] = {
                "rows": pg_rows,
                "summary": _summary("PostgreSQL 15, two server processes (clients split between them)", pg_measured),
            }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    return [*rows, summary, *([out["postgresql_two_processes"]["summary"]] if pg_rows else [])]


def _summary(store: str, measured: dict[str, float]) -> dict[str, Any]:
    return {
        "store": f"{store}; {NODES} nodes x 2 eth + 8 IB + 8 GPU, {LEASES} leases",
        "clients": CLIENTS,
        "load_average_1m_after": round(os.getloadavg()[0], 2),  # the machine is shared: context for the numbers
        "cpus": os.cpu_count(),
        "seconds_per_case": SECONDS,
        "targets": TARGETS,
        "measured": measured,
        "ratio_to_target": {k: round(measured[k] / v, 2) for k, v in TARGETS.items()},
        "all_met": all(measured[k] >= v for k, v in TARGETS.items()),
    }


def _cases(home: Path, urls: list[str], token: str) -> tuple[list[dict[str, Any]], dict[str, float]]:
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(serving({**os.environ, "GPUFABRIC_HOME": str(home), "GPUFABRIC_DB": u},
                                               "--interval", "0", ready="/healthz")) for u in urls]  # fmt: skip
        ports = [sv.port for sv in servers]
        base = datetime(2030, 1, 1, tzinfo=UTC)

        def page(_w: int, _k: int) -> tuple[str, str, bytes | None]:
            return "GET", "/api/v1/nodes?limit=100", None

        def full(_w: int, _k: int) -> tuple[str, str, bytes | None]:
            return "GET", "/api/v1/nodes?limit=1000", None

        free = NODES - LEASES  # nodes without a lease take the (scheduled) grants
        next_node = [0]
        node_lock = threading.Lock()

        def write(_w: int, _k: int) -> tuple[str, str, bytes | None] | None:
            with node_lock:
                i = next_node[0]
                if i >= free:
                    return None
                next_node[0] += 1
            start = base + timedelta(hours=i)
            body = {"tenant": "alpha", "node": f"gpu-{LEASES + i:04d}", "networks": ["alpha-net"],
                    "start": start.isoformat(), "end": (start + timedelta(hours=1)).isoformat()}
            return "POST", "/api/v1/leases", json.dumps(body).encode()

        def clear_grants() -> None:
            """Between rounds (not timed): drop the pending grants so every free node takes one again."""
            with Store.open(urls[0]) as st, st.engine.begin() as conn:
                conn.exec_driver_sql("DELETE FROM moves WHERE status = 'pending'")
                conn.exec_driver_sql("UPDATE nodes SET state = 'available' WHERE state = 'moving'")
            next_node[0] = 0

        def writes_in_rounds(clients: int) -> dict[str, Any]:
            total, wall, errors, lat_p50 = 0, 0.0, 0, []
            while wall < SECONDS:
                clear_grants()
                cpu0 = sum(_cpu_seconds(sv.proc.pid) for sv in servers)
                t0 = time.monotonic()
                r = _load(ports, token, write, SECONDS, clients)
                wall += time.monotonic() - t0
                total, errors = total + r["requests"], errors + r["errors"]
                lat_p50.append(r["p50_ms"] or 0.0)
                cpu = (sum(_cpu_seconds(sv.proc.pid) for sv in servers) - cpu0) * 1000 / max(1, r["requests"])
            return {"requests": total, "per_s": round(total / wall, 1), "p50_ms": round(statistics.median(lat_p50), 2),
                    "errors": errors, "rounds_of": free, "server_cpu_ms_per_request": round(cpu, 3)}  # fmt: skip

        mixed_k = [0]

        def uncached_full(w: int, k: int) -> tuple[str, str, bytes | None] | None:
            # every other request is a lease write, so every read misses the cache
            mixed_k[0] += 1
            if k % 2:
                req = write(w, k)
                if req is None:
                    clear_grants()
                    req = write(w, k)
                return req
            return "GET", "/api/v1/nodes?limit=1000", None

        def timed(req: Callable[[int, int], tuple[str, str, bytes | None] | None], clients: int) -> dict[str, Any]:
            cpu0 = sum(_cpu_seconds(sv.proc.pid) for sv in servers)
            r = _load(ports, token, req, SECONDS, clients)
            cpu_ms = (sum(_cpu_seconds(sv.proc.pid) for sv in servers) - cpu0) * 1000 / max(1, r["requests"])
            # load-independent: server CPU per answer, and what one core could serve at that cost
            return {**r, "server_cpu_ms_per_request": round(cpu_ms, 3),
                    "per_s_per_core_at_that_cost": round(1000 / cpu_ms, 1) if cpu_ms else None}

        _load(ports, token, page, 1.0, CLIENTS)  # warm up
        r_page = timed(page, CLIENTS)
        r_full = timed(full, CLIENTS)
        r_write = writes_in_rounds(CLIENTS)
        r_mixed = timed(uncached_full, 1)
    measured = {
        "page100_reads_per_s": r_page["per_s"],
        "full400_reads_per_s": r_full["per_s"],
        "lease_writes_per_s": r_write["per_s"],
    }
    rows = [
        {"case": "page of 100 nodes (cached per revision)", **r_page},
        {"case": "full list of 400 nodes (cached per revision)", **r_full},
        {"case": "lease writes (POST /leases)", **r_write},
        {"case": "full list, cache missed (a lease write between reads; 1 client)", **r_mixed},
    ]
    return rows, measured


if __name__ == "__main__":
    for row in run_api_bench():
        print(json.dumps(row))
