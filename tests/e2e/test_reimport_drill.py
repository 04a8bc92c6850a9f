"""The ibnetdiscover re-import drill of issue 31 (item 1) on the real lab (ibsim + OpenSM): tenants
with root rewrite their HCAs' node descriptions (what rdma-ndd / sysfs ``node_desc`` does; ibsim
answers NodeDescription from its net file, so :meth:`IbFabric.describe` rewrites it and restarts
ibsim and the trusted OpenSM), the operator re-imports the fabric with ``gpufabric inventory
import FILE --format ibnetdiscover`` on a fresh ibnetdiscover, and the PKey tables are read by SMP
(``smpquery pkeys`` as the SM node, not through gpufabric's drivers): nothing moved, the change
reported and held.

gpu-a02 is leased to beta; gpu-a01 and gpu-a03 sit idle in quarantine."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gpufabric.lab.lab import Lab

from e2e.conftest import LabEnv
from e2e.test_move import nets_of

pytestmark = pytest.mark.root
LAB_NODES = 4
LAB_HCAS = 2  # a node keeps a port when one of its HCAs is skipped: the case that lost it


@pytest.fixture(scope="module", autouse=True)
def leased(lab: LabEnv) -> Iterator[None]:
    lab.gfj("node", "move", "gpu-a02", "--to-tenant", "beta")
    first = reimport(lab)  # the operator's first import of the fabric: the SM host joins
    assert first.get("pending", []) == [] and first["sm_hosts"] == [lab.status["sm_node"].split()[0]]
    yield


def reimport(lab: LabEnv, *extra: str, check: bool = True) -> Any:
    """``ibnetdiscover > fabric.topology`` on the SM host, then the import of that file."""
    fab = Lab(lab.home).ib_fabric()
    topo = lab.home / "fabric.topology"
    topo.write_text(fab.run_tool(["ibnetdiscover"], sim_host=lab.status["sm_node"]))
    p = lab.gf("inventory", "import", str(topo), "--format", "ibnetdiscover", "--json", *extra, check=check)
    return json.loads(p.stdout) if p.returncode == 0 else p


def describe(lab: LabEnv, **texts: str) -> None:
    """Root on the hosts of the CAs (ibsim node ids, ``gpu_a01="..."`` for "gpu-a01 mlx5_1") sets
    their node descriptions."""
    Lab(lab.home).ib_fabric().describe({f"{k.replace('_', '-')} mlx5_1": v for k, v in texts.items()})


def hca(lab: LabEnv, node: str, device: str = "mlx5_1") -> str:
    return next(p["port_guid"] for p in lab.node(node)["ib"] if p["device"] == device)


def full_keys(tables: dict[str, frozenset[int]], guid: str) -> set[int]:
    return {e & 0x7FFF for e in tables.get(guid, frozenset()) if e & 0x8000}


def snapshot(lab: LabEnv) -> tuple[Any, dict[str, frozenset[int]]]:
    return lab.gfj("node", "list"), lab.pkey_tables()


def test_a_skipped_ca_and_a_description_naming_a_leased_node_move_nothing(lab: LabEnv) -> None:
    a01 = hca(lab, "gpu-a01")
    beta_pkey = nets_of(lab)["beta"][1]
    nodes, tables = snapshot(lab)
    assert a01 in json.dumps([n for n in nodes if n["name"] == "gpu-a01"])  # the list shows the ports it compares
    assert beta_pkey in full_keys(tables, hca(lab, "gpu-a02")) and full_keys(tables, a01) == set()
    # 1. a firmware-default description: the CA is skipped, its known port stays on gpu-a01
    describe(lab, gpu_a01="MT4123 ConnectX6   Mellanox Technologies")
    doc = reimport(lab)
    assert lab.gfj("node", "list") == nodes, "a skipped CA lost its known port"
    assert doc["summary"]["firmware-default-description"] == 1 and doc["pending"] == []
    assert doc["result"]["updated"] == doc["result"]["added"] == 0
    # 2. that GUID now described as leased gpu-a02's HCA: the move is held, nothing written
    describe(lab, gpu_a01="gpu-a02 mlx5_9")
    doc = reimport(lab)
    (held,) = doc["pending"]
    assert (held["port_guid"], held["change"], held["was"], held["node"]) == (a01, "move", "gpu-a01", "gpu-a02")
    assert "gpu-a02 is leased" in held["blocked"]
    assert any(m.startswith(f"held move of port {a01}") for m in doc["messages"])
    assert doc["result"]["updated"] == 0 and lab.gfj("node", "list") == nodes
    # a confirmation does not move a port into a leased node either
    for confirm in (f"{a01}=gpu-a02", "all"):
        again = reimport(lab, "--confirm", confirm)
        assert again["pending"] == doc["pending"] and again["confirmed"] == [] and again["result"]["updated"] == 0
    # the node list a person reads says it too
    text = lab.gf("inventory", "import", str(lab.home / "fabric.topology"), "--format", "ibnetdiscover").stdout
    assert f"held move of port {a01}" in text and "1 change(s) held, not written" in text
    # by SMP: gpu-a01's port holds no tenant key, beta's PKey is still on gpu-a02's port only
    after = lab.pkey_tables()
    assert after == tables, {g: (tables.get(g), t) for g, t in after.items() if tables.get(g) != t}
    holders = sorted(g for g in after if beta_pkey in full_keys(after, g))
    assert holders == sorted(lab.guids("gpu-a02"))
    # and a move of gpu-a01 still takes gpu-a01's own port, by its stored GUID
    lab.gfj("node", "move", "gpu-a01", "--to-tenant", "alpha")
    moved = lab.pkey_tables()
    assert full_keys(moved, a01) == {nets_of(lab)["alpha"][1]}
    assert sorted(g for g in moved if beta_pkey in full_keys(moved, g)) == sorted(lab.guids("gpu-a02"))
    lab.gfj("node", "move", "gpu-a01", "--to-tenant", "quarantine")


def test_a_lessee_cannot_drop_an_idle_nodes_port_with_a_duplicate_description(lab: LabEnv) -> None:
    nodes, tables = snapshot(lab)
    a02, a03 = hca(lab, "gpu-a02"), hca(lab, "gpu-a03")
    # beta's root on gpu-a02 copies idle gpu-a03's description (gpu-a01's host set its own back)
    describe(lab, gpu_a01="gpu-a01 mlx5_1", gpu_a02="gpu-a03 mlx5_1")
    doc = reimport(lab, check=False)
    assert lab.gfj("node", "list") == nodes, "the lessee's duplicate dropped a port"
    assert not isinstance(doc, subprocess.CompletedProcess), doc.stderr  # the import did not fail
    assert doc["summary"]["duplicate-description"] == 2 and doc["pending"] == []
    assert doc["result"]["updated"] == doc["result"]["added"] == 0
    assert a03 in json.dumps(lab.gfj("node", "show", "gpu-a03")) and a02 in json.dumps(lab.gfj("node", "show", "gpu-a02"))
    assert lab.pkey_tables() == tables


def test_bad_confirm_values_are_one_line_naming_the_field_and_write_nothing(lab: LabEnv) -> None:
    nodes = lab.gfj("node", "list")
    for bad in ("0x12", "zz=gpu-a01", "0x0002c90310000101=Bad Name", "0x0002c903100001ff=gpu-a01"):
        p = reimport(lab, "--confirm", bad, check=False)
        assert p.returncode == 2, (bad, p.stdout)
        err = json.loads(p.stdout)["error"]
        assert err["field"] == "--confirm", err
        q = lab.gf("inventory", "import", str(lab.home / "fabric.topology"), "--format", "ibnetdiscover",
                   "--confirm", bad, check=False)  # fmt: skip
        assert q.returncode == 2 and q.stderr.count("\n") == 1 and "--confirm" in q.stderr, q.stderr
    yaml = lab.home / "one.yaml"
    yaml.write_text("version: 1\nnodes: []\n")
    p = lab.gf("inventory", "import", str(yaml), "--confirm", "all", check=False)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--confirm" in p.stderr, p.stderr
    assert lab.gfj("node", "list") == nodes


def test_a_rogue_sm_is_reported_on_the_node_its_port_is_stored_on(lab: LabEnv) -> None:
    """Issue 31 item 5, last (the rogue rewrites tables until contained): root on idle gpu-a03
    describes its HCA as gpu-a01's and runs an SM there; the audit and the containment name
    gpu-a03, the node whose port GUID the store holds, and cut gpu-a03's switch port."""
    rogue = hca(lab, "gpu-a03", "mlx5_0")
    Lab(lab.home).ib_fabric().describe({"gpu-a03 mlx5_0": "gpu-a01 mlx5_0"})
    lab.gfj("lab", "rogue-sm", "--node", "gpu-a03")  # SIM_HOST is ibsim's node id: still gpu-a03's HCA

    def found() -> list[dict[str, Any]]:
        report = json.loads(lab.gf("audit", "--json", check=False).stdout)
        return [v for v in report["violations"] if v["invariant"] == "IB-ROGUE-SM" and v["port"] == rogue]

    deadline = time.monotonic() + 40
    while not (seen := found()):
        assert time.monotonic() < deadline, "IB-ROGUE-SM never reported"
        time.sleep(0.5)
    (v,) = seen
    assert v["node"] == "gpu-a03" and "on node gpu-a03" in v["message"], v
    assert "on node gpu-a01" not in v["message"] and "'gpu-a01 mlx5_0'" in v["message"], v  # quoted as a claim
    fixed = lab.gfj("reconcile", "--once", "--policy", "repair")
    assert fixed["rogue_contained"] == [rogue], fixed
    assert "gpu-a01" not in json.dumps(fixed).replace("'gpu-a01 mlx5_0'", ""), fixed
