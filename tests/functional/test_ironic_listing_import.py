"""``gpufabric inventory import --from ironic LISTING``: a recorded real Ironic listing
(tests/fixtures/ironic/two-gpu-nodes.json, Ironic 39.0.0) imported by the CLI against a
fabrics.yaml of two NVUE leaves, no Ironic running: the nodes and their UUIDs, the ``--node-map``
file, the reported ports; and the options it refuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

GF = str(Path(sys.executable).parent / "gpufabric")
LISTING = Path(__file__).resolve().parents[1] / "fixtures" / "ironic" / "two-gpu-nodes.json"
FABRICS = {"ethernet": [{"driver": "ssh", "options": {"switch": sw, "dialect": "nvue"}} for sw in ("leaf1", "leaf2")]}
A01, A02 = "6f1c3a52-8f43-4b9e-9a63-0b5c2a9d0a01", "6f1c3a52-8f43-4b9e-9a63-0b5c2a9d0a02"


def gf(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUFABRIC_HOME": str(home), "NO_COLOR": "1"}
    env.pop("GPUFABRIC_IRONIC_URL", None)
    return subprocess.run([GF, *args], env=env, capture_output=True, text=True, timeout=120)


def test_a_recorded_ironic_listing_imports_with_its_node_map(tmp_path: Path) -> None:
    (tmp_path / "fabrics.yaml").write_text(yaml.safe_dump(FABRICS))
    r = gf(
        tmp_path,
        "inventory",
        "import",
        "--from",
        "ironic",
        str(LISTING),
        "--json",
        "--node-map",
        str(tmp_path / "map.json"),
    )
    assert r.returncode == 0, (r.stdout, r.stderr)
    doc = json.loads(r.stdout)
    assert (doc["format"], doc["nodes"], doc["result"]["added"]) == ("ironic", 2, 2)
    assert doc["identities"] == {"gpu-a01": A01, "gpu-a02": A02}
    assert json.loads((tmp_path / "map.json").read_text()) == {A01: "gpu-a01", A02: "gpu-a02"}
    assert sorted(u["address"] for u in doc["unmatched"]) == ["52:54:00:a2:00:02", "52:54:00:a2:00:03"]
    rows = {n["name"]: n["host_id"] for n in json.loads(gf(tmp_path, "node", "list", "--json").stdout)}
    assert rows == {"gpu-a01": A01, "gpu-a02": A02}  # the UUID stored as the node's identity (binding:host_id)


def test_the_ironic_options_it_refuses(tmp_path: Path) -> None:
    (tmp_path / "fabrics.yaml").write_text(yaml.safe_dump(FABRICS))
    for args, field in ((["--from", "ironic", "--json"], "--ironic-url"),  # no URL, no env
                        (["--from", "nova", "--json"], "--from"),
                        ([str(LISTING), "--node-map", str(tmp_path / "m.json"), "--json"], "--node-map"),
                        (["--json"], "file"),
                        (["--from", "ironic", "--ironic-url", "ftp://ironic", "--json"], "--ironic-url")):  # fmt: skip
        r = gf(tmp_path, "inventory", "import", *args)
        assert r.returncode != 0 and json.loads(r.stdout)["error"]["field"] == field, (args, r.stdout, r.stderr)
    assert not (tmp_path / "m.json").exists()
