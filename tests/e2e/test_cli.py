"""The ``gpufabric`` command without a lab: imports, invalid values (one line naming the
field and the allowed range, exit 2, nothing written), and --json everywhere."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from e2e.conftest import GF

FIXTURES = Path(__file__).parents[1] / "fixtures"
EXAMPLE = Path(__file__).parents[2] / "examples" / "inventory.yaml"


@pytest.fixture
def gf(tmp_path: Path):  # type: ignore[no-untyped-def]
    env = {**os.environ, "GPUFABRIC_HOME": str(tmp_path), "GPUFABRIC_DB": ""}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([GF, *args], env=env, capture_output=True, text=True, timeout=120, check=False)

    return run


def ok_json(p: subprocess.CompletedProcess[str]) -> object:
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_inventory_yaml_then_ibnetdiscover_merges_ib_ports(gf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res = ok_json(gf("inventory", "import", str(EXAMPLE), "--json"))
    assert res["format"] == "yaml" and res["result"]["added"] == res["nodes"] > 0  # type: ignore[index]
    again = ok_json(gf("inventory", "import", str(EXAMPLE), "--json"))
    assert again["result"]["added"] == 0 and again["result"]["unchanged"] == res["nodes"]  # type: ignore[index]
    lab = ok_json(
        gf(
            "inventory",
            "import",
            str(FIXTURES / "ibnetdiscover" / "lab-6x2-sm.topology.txt"),
            "--format",
            "ibnetdiscover",
            "--json",
        )
    )
    assert lab["nodes"] == 7  # type: ignore[index]  # gpu-a01..a06 and the SM host sm-01
    node = ok_json(gf("node", "show", "gpu-a03", "--json"))
    assert [(p["device"], p["port_guid"]) for p in node["ports"]["infiniband"]] == [  # type: ignore[index]
        ("mlx5_0", "0x0002c90310000301"),
        ("mlx5_1", "0x0002c90310000311"),
    ]
    assert {p["switch_port"] for p in node["ports"]["infiniband"]} != {None}  # type: ignore[index]


@pytest.mark.parametrize(
    ("args", "field", "allowed"),
    [
        (["network", "create", "n1", "--tenant", "Bad Name"], "network.tenant", "1-63 chars"),
        (["lease", "create", "--tenant", "t1", "--node", "n1", "--end", "tomorrow"], "end", "ISO 8601"),
        (["audit", "--fail-on", "severe"], "fail-on", "critical, high, medium or low"),
        (["reconcile", "--policy", "sometimes"], "policy", "repair or report"),
    ],
    ids=["bad-name", "bad-time", "bad-severity", "bad-policy"],
)
def test_bad_arguments_one_line_naming_field_and_range(gf, args: list[str], field: str, allowed: str) -> None:  # type: ignore[no-untyped-def]
    p = gf(*args)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and f"invalid {field}" in p.stderr and allowed in p.stderr, p.stderr


@pytest.mark.parametrize(
    ("config", "field", "allowed"),
    [
        ("segments: {ethernet: {quarantine_vlan: 4095}}", "ethernet.quarantine_vlan", "1-4094"),
        ("segments: {infiniband: {seg_range: 1500-2500}}", "infiniband.seg_range", "disjoint from user_vlan_range"),
        (
            "segments: {infiniband: {mapping: {mode: table, table: {3000: '0x7fff'}}}}",
            "infiniband.mapping.table",
            "0x0001-0x7ffe",
        ),
    ],
    ids=["vlan-4095", "overlapping-ranges", "pkey-7fff"],
)
def test_bad_config_refused_and_nothing_written(gf, tmp_path: Path, config: str, field: str, allowed: str) -> None:  # type: ignore[no-untyped-def]
    assert gf("tenant", "create", "t1").returncode == 0
    (tmp_path / "config.yaml").write_text(config + "\n")
    p = gf("network", "create", "n1", "--tenant", "t1", "--json")
    assert p.returncode == 2
    err = json.loads(p.stdout)
    assert err["field"].startswith(field) and allowed in err["allowed"], err
    (tmp_path / "config.yaml").unlink()
    assert ok_json(gf("network", "list", "--json")) == []


def test_malformed_guid_in_inventory_refused_and_nothing_written(gf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "inv.yaml"
    bad.write_text(EXAMPLE.read_text().replace("0x", "0xzz", 1))
    p = gf("inventory", "import", str(bad))
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "invalid" in p.stderr and "nodes[" in p.stderr
    assert ok_json(gf("node", "list", "--json")) == []
