"""``gpufabric inventory import --format ibnetdiscover`` of whole real fabrics (the outputs of
tests/fixtures/real/ibnetdiscover/, see its README): what it matched, skipped and why, per CA,
and ``--strict``'s all-or-nothing. On aa4b99f every one of these imports was refused."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from e2e.conftest import GF
from support.real_outputs import manifest, real_path


@pytest.fixture
def gf(tmp_path: Path):  # type: ignore[no-untyped-def]
    env = {**os.environ, "GPUFABRIC_HOME": str(tmp_path), "GPUFABRIC_DB": ""}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([GF, *args], env=env, capture_output=True, text=True, timeout=600, check=False)

    return run


def _import(gf, file: str, *extra: str) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    path = real_path(manifest("ibnetdiscover", file))
    return gf("inventory", "import", str(path), "--format", "ibnetdiscover", *extra)  # type: ignore[no-any-return]


def _ok(p: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert isinstance(doc, dict)
    return doc


def test_fabric_with_a_sharp_aggregation_node_imports_its_hosts_and_reports_every_node(gf) -> None:  # type: ignore[no-untyped-def]
    res = _ok(_import(gf, "ufm-small.topo", "--json"))
    assert res["nodes"] == 5 and res["summary"] == {"matched": 12, "sharp-aggregation-node": 1, "switch": 2}
    cas = {c["node_guid"]: c for c in res["cas"]}  # type: ignore[attr-defined]
    assert len(cas) == 15
    assert cas["0xb8599f0300fc6dec"]["status"] == "skipped"
    assert cas["0xb8599f0300fc6dec"]["skip"] == "sharp-aggregation-node"
    assert cas["0xb8599f0300fc6de4"]["skip"] == "switch"  # the MQM8700 holding it
    hca = cas["0xec0d9a03007d7d0a"]
    assert (hca["status"], hca["host"], hca["device"], hca["ports"]) == ("matched", "r-dcs96", "HCA-1", 1)
    node = _ok(gf("node", "show", "r-dcs96", "--json"))
    ib = node["ports"]["infiniband"]  # type: ignore[index]
    assert [(p["device"], p["switch_port"]) for p in ib][:2] == [("HCA-1", 23), ("HCA-2", 24)]  # type: ignore[index]


def test_strict_refuses_the_whole_fabric_in_one_line_and_writes_nothing(gf) -> None:  # type: ignore[no-untyped-def]
    p = _import(gf, "ufm-small.topo", "--strict")
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "invalid ib_node_description" in p.stderr and "Aggregation Node" in p.stderr
    listed = gf("node", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []


def test_upper_case_hosts_of_a_saved_capture_are_imported_in_lower_case(gf) -> None:  # type: ignore[no-untyped-def]
    res = _ok(_import(gf, "ufm-ndt-director-putty.topo", "--json"))
    assert res["nodes"] == 280 and res["summary"]["firmware-default-description"] == 103  # type: ignore[index]
    node = _ok(gf("node", "show", "sat111092710053", "--json"))
    assert len(node["ports"]["infiniband"]) == 8  # type: ignore[index]


def test_unconfigured_hosts_are_listed_with_the_reason(gf) -> None:  # type: ignore[no-untyped-def]
    p = _import(gf, "ibtopotool-1.topo")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("skipped CA") == 4 and "firmware-default description" in p.stdout
    assert "imported 0 nodes" in p.stdout


def test_superpod_import(gf) -> None:  # type: ignore[no-untyped-def]
    """NVIDIA Selene's compute fabric: 666 switches, 666 SHARP aggregation nodes, 3675 HCAs of
    469 hosts ("luna-0560 mlx5_9", "selene-swift-01 HCA-2", "selene-cache-02 mlx5_1 ")."""
    res = _ok(_import(gf, "selene-compute.topo", "--json"))
    assert res["nodes"] == 469 and res["result"]["added"] == 469  # type: ignore[index]
    assert res["summary"] == {"matched": 3675, "sharp-aggregation-node": 666, "switch": 666}
    node = _ok(gf("node", "show", "selene-cache-02", "--json"))
    assert {p["device"] for p in node["ports"]["infiniband"]} >= {"mlx5_1"}  # type: ignore[index]
