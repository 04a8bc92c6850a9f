"""``gpufabric store backup`` under load and ``store restore`` into a fresh home, SQLite and
PostgreSQL.

A writer process keeps committing while the backup runs: per iteration i, four transactions in
order — tenant ``w<i>``, network ``wnet<i>`` (with its Ethernet and InfiniBand segments, one
transaction), a lease of node ``gpu-l<i>`` in that network, a move request of node ``gpu-m<i>``
into it. The restored store must be exactly a prefix of that history (the state as of one
commit): every table holds iterations 0..k-1 with no gap, in write order, every network with
both its segments, every lease and move with its network; it must hold at least what was
committed before the backup started and at most what was committed when it returned; its rows
equal the source's; its counts equal the backup report's. Restore refuses a store holding data
(one line, nothing changed) unless ``--force``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gpufabric.store.backup import backup
from gpufabric.store.core import Store
from gpufabric.store.moves import MoveLedger
from gpufabric.workflow.inventory import inventory_from_dict

GF = str(Path(sys.executable).parent / "gpufabric")
ITERATIONS = 80  # an upper bound: the writer is stopped a few iterations after the backup
WRITER = r"""
import sys
from datetime import UTC, datetime
from pathlib import Path
from gpufabric.domain.models import Lease
from gpufabric.domain.moves import MoveRequest
from gpufabric.store.registry import parse_segments
from gpufabric.store.core import Store
from gpufabric.store.moves import MoveLedger

url, n, progress = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
cfg = parse_segments()
with Store.open(url) as s:
    ledger = MoveLedger(s)
    for i in range(n):
        s.create_tenant(f"w{i:03d}")
        s.create_network(f"wnet{i:03d}", f"w{i:03d}", cfg)
        s.create_lease(Lease(tenant=f"w{i:03d}", node=f"gpu-l{i:03d}", start=datetime(2026, 1, 1, tzinfo=UTC),
                             networks=(f"wnet{i:03d}",)))
        ledger.request(f"gpu-m{i:03d}", MoveRequest(f"w{i:03d}", networks=(f"wnet{i:03d}",), requested_by="writer"))
        tmp = progress.with_suffix(".tmp")
        tmp.write_text(str(i + 1))
        tmp.replace(progress)
"""


def _inventory(n: int) -> dict[str, Any]:
    nodes = []
    for kind, base in (("l", 0), ("m", 1)):
        for i in range(n):
            k = base * n + i
            nodes.append({
                "name": f"gpu-{kind}{i:03d}",
                "ethernet": [{"name": "eth0", "switch": "leaf-1", "switch_port": f"Ethernet{k + 1}",
                              "mac": f"52:54:00:{k // 256:02x}:{k % 256:02x}:01"}],
                "ib": [{"device": "mlx5_0", "port_num": 1, "port_guid": f"0x0002c903{k + 1:08x}",
                        "node_guid": f"0x0002c904{k + 1:08x}"}],
            })  # fmt: skip
    return {"version": 1, "nodes": nodes}


def _progress(path: Path) -> int:
    try:
        return int(path.read_text() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def _index(names: list[str], prefix: str) -> list[int]:
    return sorted(int(n[len(prefix):]) for n in names if n.startswith(prefix))


def _snapshot(url: str) -> dict[str, Any]:
    """What the app reads from a store: names by table, and each lease's and move's essentials."""
    with Store.open(url) as s:
        nets = s.networks()
        return {
            "nodes": sorted(n.name for n in s.nodes()),
            "tenants": sorted(t.name for t in s.tenants()),
            "networks": sorted(n.name for n in nets),
            "segments": {n.name: sorted(f for f in ("ethernet", "infiniband") if n.segment(f))
                         for n in nets},
            "leases": sorted((x.tenant, x.node, x.networks) for x in s.leases()),
            "moves": sorted((m.node, m.to_tenant, m.networks, m.status.value) for m in MoveLedger(s).moves()),
        }  # fmt: skip


def _gf(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GF, *args], env=env, capture_output=True, text=True, timeout=300, check=False)


def test_backup_under_writes_then_restore_into_a_fresh_home(store_url: str, fresh_url: str, tmp_path: Path) -> None:
    with Store.open(store_url) as s:
        s.upsert_inventory(inventory_from_dict(_inventory(ITERATIONS)))
    progress = tmp_path / "progress"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, store_url, str(ITERATIONS), str(progress)],
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while _progress(progress) < 5:
            assert writer.poll() is None, writer.stderr.read() if writer.stderr else ""
            assert time.monotonic() < deadline, "the writer made no progress"
            time.sleep(0.05)
        before = _progress(progress)
        report = backup(store_url, tmp_path / "store.bak")
        after = _progress(progress)
        while _progress(progress) < min(after + 3, ITERATIONS):  # writes go on after the backup too
            assert writer.poll() in (None, 0), writer.stderr.read() if writer.stderr else ""
            assert time.monotonic() < deadline + 120, "the writer stalled"
            time.sleep(0.05)
    finally:
        writer.kill()
        writer.wait(timeout=60)
    print(f"backup of {report.bytes} bytes in {report.seconds:.3f}s; writer at {before} -> {after} iterations")
    assert (tmp_path / "store.bak").stat().st_mode & 0o777 == 0o600

    env = {**os.environ, "GPUFABRIC_DB": "" if fresh_url.startswith("sqlite") else fresh_url,
           "GPUFABRIC_HOME": str(Path(fresh_url.removeprefix("sqlite:///")).parent) if fresh_url.startswith("sqlite")
           else str(tmp_path / "unused-home")}  # fmt: skip
    p = _gf(env, "store", "restore", str(tmp_path / "store.bak"), "--json")
    assert p.returncode == 0, p.stderr
    restored = json.loads(p.stdout)
    assert restored["counts"] == dict(report.counts) and restored["backup_revision"] == report.revision
    assert restored["replaced"] == {}

    got, source = _snapshot(fresh_url), _snapshot(store_url)
    t, n, le, mv = (_index(got["tenants"], "w"), _index(got["networks"], "wnet"),
                    [int(x[1][len("gpu-l"):]) for x in got["leases"]], [int(x[0][len("gpu-m"):]) for x in got["moves"]])  # fmt: skip
    for ids in (t, n, le, mv):
        assert ids == list(range(len(ids))), f"not a prefix of the history: {ids}"
    assert len(t) >= len(n) >= len(le) >= len(mv) >= len(t) - 1, (len(t), len(n), len(le), len(mv))
    assert before <= len(mv) and len(t) <= after + 1, (before, len(t), len(mv), after)
    assert all(segs == ["ethernet", "infiniband"] for segs in got["segments"].values())
    assert got["nodes"] == source["nodes"] and len(got["nodes"]) == 2 * ITERATIONS
    for key in ("tenants", "networks", "leases", "moves"):  # the source's first rows, exactly
        assert set(got[key]) <= set(source[key]), key
    assert got["leases"] == sorted(x for x in source["leases"] if int(x[1][len("gpu-l"):]) < len(le))
    assert got["moves"] == sorted(x for x in source["moves"] if int(x[0][len("gpu-m"):]) < len(mv))
    assert restored["counts"]["tenants"] == len(t) and restored["counts"]["moves"] == len(mv)
    assert before < ITERATIONS and len(source["tenants"]) > len(t)  # the writer ran before and after the backup

    # a store holding data is refused, one line, unchanged; --force replaces it
    refused = _gf(env, "store", "restore", str(tmp_path / "store.bak"))
    assert refused.returncode == 2 and "not empty" in refused.stderr and "--force" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    with Store.open(fresh_url) as s:
        s.create_tenant("extra")
    refused_json = json.loads(_gf(env, "store", "restore", str(tmp_path / "store.bak"), "--json").stdout)
    assert refused_json["error"]["code"] == "conflict" and refused_json["details"]["tenants"] == len(t) + 1
    assert "extra" in _snapshot(fresh_url)["tenants"]
    forced = _gf(env, "store", "restore", str(tmp_path / "store.bak"), "--force", "--json")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["replaced"]["tenants"] == len(t) + 1
    assert _snapshot(fresh_url) == got


def test_backup_refuses_an_existing_file_and_restore_a_foreign_one(store_url: str, tmp_path: Path) -> None:
    with Store.open(store_url) as s:
        s.create_tenant("alpha")
    target = tmp_path / "b.bak"
    target.write_text("keep me")
    env = {**os.environ, "GPUFABRIC_DB": store_url, "GPUFABRIC_HOME": str(tmp_path / "h")}
    p = _gf(env, "store", "backup", str(target))
    assert p.returncode == 2 and "invalid path" in p.stderr and "--force" in p.stderr
    assert target.read_text() == "keep me"
    ok = _gf(env, "store", "backup", str(target), "--force", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["counts"]["tenants"] == 1
    junk = tmp_path / "junk.bak"
    junk.write_bytes(b"not a backup at all")
    bad = _gf(env, "store", "restore", str(junk), "--force")
    assert bad.returncode == 2 and "invalid path" in bad.stderr
    with Store.open(store_url) as s:
        assert [t.name for t in s.tenants()] == ["alpha"]  # nothing changed


def test_restore_migrates_an_older_backup_and_refuses_a_newer_one(
    store_url: str, fresh_url: str, tmp_path: Path
) -> None:
    from sqlalchemy import text

    from gpufabric.store import db
    from gpufabric.store.backup import restore

    from support.migrate import alembic

    alembic(store_url, "upgrade", "0003")
    engine = db.make_engine(store_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO tenants (name, created_at) VALUES ('old', :t)"),
                         {"t": "2026-01-01 00:00:00" if store_url.startswith("sqlite") else "2026-01-01T00:00:00Z"})
    finally:
        engine.dispose()
    old = backup(store_url, tmp_path / "old.bak")
    assert old.revision == "0003" and old.counts["tenants"] == 1 and "tokens" not in old.counts
    report = restore(fresh_url, tmp_path / "old.bak")
    assert (report.backup_revision, report.revision) == ("0003", db.head_revision())
    with Store.open(fresh_url) as s:
        assert [t.name for t in s.tenants()] == ["old"]

    engine = db.make_engine(store_url)  # a store written by a newer release: a revision unknown here
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    finally:
        engine.dispose()
    backup(store_url, tmp_path / "new.bak")
    env = {**os.environ, "GPUFABRIC_DB": fresh_url, "GPUFABRIC_HOME": str(tmp_path / "h")}
    p = _gf(env, "store", "restore", str(tmp_path / "new.bak"), "--force")
    assert p.returncode == 2 and "its revision is 9999" in p.stderr, p.stderr
    with Store.open(fresh_url) as s:
        assert [t.name for t in s.tenants()] == ["old"]  # nothing changed
