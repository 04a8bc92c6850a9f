"""Two workers on one PostgreSQL store, N move requests arriving concurrently, a real lab of N
nodes (24 in `make test`, 50 in `make test-full`): every move is applied exactly once (claimed once, one lease per node), the
workers split the work (SKIP LOCKED), and the fabrics end with every node in its tenant."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import PgCluster
from gpufabric.domain.moves import MoveRequest
from gpufabric.store.core import Store
from gpufabric.store.moves import MoveLedger

from e2e.conftest import GF, LabEnv

pytestmark = [pytest.mark.root, pytest.mark.postgres]
N = 50 if os.environ.get("GPUFABRIC_TEST_FULL") == "1" else 24  # make test: 24 (CI time); make test-full: 50


@pytest.fixture(scope="module")
def pg_lab(tmp_path_factory: pytest.TempPathFactory, postgres_cluster: PgCluster) -> Iterator[LabEnv]:
    with postgres_cluster.admin() as c:
        c.execute("CREATE DATABASE workers_e2e")
    home = tmp_path_factory.mktemp("gfpg")
    env = LabEnv(home, {})
    url = postgres_cluster.url("workers_e2e")
    env.gf("--db", url, "lab", "up", "--nodes", str(N), "--hcas-per-node", "1", "--json", timeout=600)
    env.status = json.loads(env.gf("lab", "status", "--json").stdout)
    env.db_url = url  # type: ignore[attr-defined]
    yield env
    env.gf("lab", "down", check=False)


def test_concurrent_moves_two_workers_each_applied_once(pg_lab: LabEnv) -> None:
    url: str = pg_lab.db_url  # type: ignore[attr-defined]
    db = ["--db", url]
    pg_lab.gf(*db, "tenant", "create", "alpha")
    pg_lab.gf(*db, "network", "create", "alpha-net", "--tenant", "alpha")
    store = Store.open(url=url)
    ledger = MoveLedger(store)
    nodes = [f"gpu-a{i:02d}" for i in range(1, N + 1)]
    with ThreadPoolExecutor(max_workers=16) as pool:  # 50 requests arriving at once
        moves = list(pool.map(lambda n: ledger.request(n, MoveRequest("alpha", "baremetal", ("alpha-net",))), nodes))
    assert len({m.id for m in moves}) == N

    env = {**pg_lab.env, "GPUFABRIC_DB": url}
    workers = [
        subprocess.Popen(
            [GF, "move", "resume", "--limit", str(N // 2), "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [w.communicate(timeout=600) for w in workers]
    assert [w.returncode for w in workers] == [0, 0], [o[1][-2000:] for o in outs]
    ran = [json.loads(o[0])["moves"] for o in outs]
    assert sorted(len(r) for r in ran) == [N // 2, N // 2], "each worker ran its own half"
    ids = [m["id"] for r in ran for m in r]
    assert sorted(ids) == sorted(m.id for m in moves), "every move ran, none twice"

    final = ledger.moves()
    assert all(m.status.value == "done" and m.attempts == 1 for m in final)
    assert len({m.claimed_by for m in final}) == 2
    leases = store.leases()
    assert sorted(x.node for x in leases) == nodes  # exactly one lease per node
    tag = json.loads(pg_lab.gf(*db, "network", "list", "--json").stdout)[0]["segments"]
    vlan = next(s["vlan"] for s in tag if s["fabric"] == "ethernet")
    assert {pg_lab.ovs_tag(p) for n in nodes for p in pg_lab.eth_ports(n)} == {vlan}
    audit = json.loads(pg_lab.gf(*db, "audit", "--json", check=False).stdout)
    assert audit["violations"] == []
    store.close()
