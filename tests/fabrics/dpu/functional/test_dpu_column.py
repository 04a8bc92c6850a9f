"""The DPU kind owns its column (issue 19): a node's DPUs are the DPU kind's entries in the
generic port table, read from an inventory's ``dpus:`` key (or ``fabrics: {dpu: [...]}``) by
the kind's own parser, shown by the kind's own view. Local import, the API's import and the
remote CLI's import (a real uvicorn, the installed ``gpufabric``) store the same node; the
node's JSON has its DPU under ``fabrics.dpu`` only."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from gpufabric.api.app import create_app
from gpufabric.domain.errors import ValidationError
from gpufabric.fabrics.dpu.entries import Dpu, DpuMode
from gpufabric.fabrics.dpu.entries.info import node_dpus
from gpufabric.workflow.inventory import parse_inventory

from support.api_world import World, build_world
from support.live_api import gf, live_api

ENTRY = {"name": "bf3", "mode": "dpu-host", "representors": ["pf0vf1", "pf0vf2"], "nic_model": "BlueField-3"}
WANT = Dpu("d1", "bf3", DpuMode.DPU_HOST, (("nic_model", "BlueField-3"), ("representors", "pf0vf1,pf0vf2")))


def test_the_dpus_key_and_the_fabrics_section_read_the_same() -> None:
    old = parse_inventory(yaml.safe_dump({"nodes": [{"name": "d1", "dpus": [ENTRY]}]}))
    new = parse_inventory(yaml.safe_dump({"nodes": [{"name": "d1", "fabrics": {"dpu": [ENTRY]}}]}))
    assert old == new and node_dpus(old.nodes[0]) == (WANT,)
    assert [p.instance for p in old.nodes[0].fabric_ports] == ["dpu"]
    assert parse_inventory("nodes: [{name: d1, dpus: []}]").nodes[0].fabric_ports == ()  # none: no entry


@pytest.mark.parametrize(
    ("node", "field", "allowed"),
    [
        ({"dpus": [ENTRY], "fabrics": {"dpu": [ENTRY]}}, "nodes[0].dpus", "the node's ports on dpu in one place: dpus or fabrics.dpu, not both"),
        ({"dpus": [ENTRY, ENTRY]}, "nodes[0].dpus[1].name", "unique DPU names per node (also at nodes[0].dpus[0].name)"),
        ({"fabrics": {"dpu": [{**ENTRY, "mode": "smart"}]}}, "nodes[0].fabrics.dpu[0].mode", "full or dpu or dpu-host"),
        ({"dpus": {"name": "bf3"}}, "nodes[0].dpus", "a list"),
        ({"fabrics": {"nosuch": []}}, "nodes[0].fabrics.nosuch", "a fabric instance with an inventory section: dpu, ethernet, infiniband, nvlink"),
    ],
)
def test_bad_dpu_entries_name_their_field(node: dict[str, object], field: str, allowed: str) -> None:
    with pytest.raises(ValidationError) as e:
        parse_inventory(yaml.safe_dump({"nodes": [{"name": "d1", **node}]}))
    assert (e.value.field, e.value.allowed) == (field, allowed)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, str]]:
    w = build_world(tmp_path_factory.mktemp("srv"), nodes=1, leased=0)
    with live_api(w.ctx) as base:
        yield w, base
    w.store.close()


def test_local_api_and_remote_imports_store_the_same_dpu(served: tuple[World, str], tmp_path: Path) -> None:
    w, base = served
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"nodes": [{"name": "d1", "dpus": [ENTRY]}]}))
    local = tmp_path / "local"
    local.mkdir()
    assert gf(local, "inventory", "import", str(inv)).returncode == 0
    shown = gf(local, "node", "show", "d1", "--json")
    assert shown.returncode == 0, shown.stderr
    here = json.loads(shown.stdout)
    assert "dpus" not in here and [d["name"] for d in here["fabrics"]["dpu"]["dpus"]] == ["bf3"]
    assert here["fabrics"]["dpu"]["summary"] == "bf3 none"  # in quarantine: no OVN-Kubernetes role
    text = gf(local, "node", "show", "d1")
    assert "bf3 none" in text.stdout and "Dpu(" not in text.stdout, text.stdout
    remote = tmp_path / "remote"
    remote.mkdir()
    there = gf(remote, "--api", base, "inventory", "import", str(inv), GPUFABRIC_TOKEN=w.tokens["admin"])
    assert there.returncode == 0 and "1 added" in there.stdout, there.stdout + there.stderr
    assert node_dpus(w.store.node("d1")) == (WANT,)
    got = json.loads(gf(remote, "--api", base, "node", "show", "d1", "--json", GPUFABRIC_TOKEN=w.tokens["admin"]).stdout)
    assert got["fabrics"]["dpu"]["dpus"] == here["fabrics"]["dpu"]["dpus"]


def test_the_api_takes_the_kinds_own_keys_and_the_fabrics_section_alike(served: tuple[World, str]) -> None:
    """``POST /inventory`` takes a node's DPUs under the DPU kind's own key (``dpus``, its field of
    the API's schema) or under ``fabrics.dpu``: the same stored entries; any other key is refused."""
    w, _ = served
    with TestClient(create_app(w.ctx)) as client:
        for node, entry in (("d2", {"fabrics": {"dpu": [ENTRY]}}), ("d3", {"dpus": [ENTRY]})):
            r = client.post("/api/v1/inventory", json={"nodes": [{"name": node, **entry}]}, headers=w.headers("admin"))
            assert r.status_code == 200 and r.json()["added"] == 1, r.text
        facts = [[(d.name, d.mode, d.details) for d in node_dpus(w.store.node(n))] for n in ("d2", "d3")]
        assert facts[0] == facts[1] == [(WANT.name, WANT.mode, WANT.details)]
        bad = {"nodes": [{"name": "d4", "dpus": [{**ENTRY, "mode": "smart"}]}, {"name": "d5", "colour": "red"}]}
        r = client.post("/api/v1/inventory", json=bad, headers=w.headers("admin"))
        assert r.status_code == 422, r.text
        assert "d4" not in {n.name for n in w.store.nodes()}  # nothing written
        schema = client.get("/openapi.json").json()["components"]["schemas"]["NodeIn"]["properties"]
        assert {"dpus", "gpus", "fabrics"} <= set(schema)  # each kind's own field, from the kind
