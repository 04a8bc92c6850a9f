"""``POST /api/v1/inventory/{format}``: a kind's import format (ibnetdiscover output here) read by
the server against its own fabrics.yaml and store, and ``gpufabric --api URL inventory import
--format NAME`` through it (a real uvicorn on 127.0.0.1, the installed ``gpufabric``): the same
JSON as the same import on a local store; a lessee is refused before anything is written; an
unknown format, a body that is not UTF-8 and one over ``max_inventory_body`` are refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from gpufabric.api.app import create_app
from gpufabric.api.limits import ApiLimits
from gpufabric.fabrics.infiniband.entries import all_ib_ports

from support.api_world import World, build_world, clone_world
from support.live_api import gf, live_api

TOPO = Path(__file__).parents[1] / "fixtures" / "ibnetdiscover" / "lab-6x2-sm.topology.txt"
SM_PORT_GUID = "0x0002c90310000001"  # "sm-01 mlx5_0" in TOPO
SETTINGS = {"sm_port_guids": [SM_PORT_GUID]}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, str]]:
    w = build_world(tmp_path_factory.mktemp("srv"), nodes=2, leased=0)
    w.ctx.fabrics_settings = lambda: SETTINGS  # the server's fabrics.yaml
    with live_api(w.ctx) as base:
        yield w, base
    w.store.close()


def test_a_kind_format_through_the_api_reads_as_on_a_local_store(served: tuple[World, str], tmp_path: Path) -> None:
    w, base = served
    remote = tmp_path / "remote"  # the CLI's own home: no store, no fabrics.yaml (the server's count)
    remote.mkdir()
    before = {n.name for n in w.store.nodes()}
    args = ("--api", base, "inventory", "import", str(TOPO), "--format", "ibnetdiscover", "--json")
    refused = gf(remote, *args, GPUFABRIC_TOKEN=w.tokens["lessee-alpha"])
    assert refused.returncode == 2 and json.loads(refused.stdout)["error"]["message"] == "role lessee may not create nodes"
    assert {n.name for n in w.store.nodes()} == before  # nothing written
    local = tmp_path / "local"
    local.mkdir()
    (local / "fabrics.yaml").write_text(f"sm_port_guids: ['{SM_PORT_GUID}']\n")
    here = gf(local, *args[2:])
    assert here.returncode == 0, here.stderr
    there = gf(remote, *args, GPUFABRIC_TOKEN=w.tokens["admin"])
    assert there.returncode == 0, there.stderr
    doc, local_doc = json.loads(there.stdout), json.loads(here.stdout)
    # the server's store has nodes of its own whose ports this fabric does not show: kept, reported
    kept = {k["node"] for k in doc.pop("kept")}
    assert local_doc.pop("kept") == [] and kept == {n for n in before if n.startswith("gpu-")}
    assert doc.pop("messages")[1].startswith("16 known port(s) not on the fabric, kept")
    local_doc.pop("messages")
    assert doc == local_doc  # one shape, one reading: the server's fabrics.yaml and store
    assert doc["sm_hosts"] == ["sm-01"] and doc["held"]["sm-01"] and doc["result"]["added"] == doc["nodes"] == 7
    sm = w.store.node("sm-01")
    assert sm.state.value == "maintenance" and SM_PORT_GUID in {str(p.port_guid) for p in all_ib_ports(sm)}
    again = gf(remote, *args[:-1], GPUFABRIC_TOKEN=w.tokens["admin"])  # the person's form: no repr
    assert again.returncode == 0 and "through the API: 0 added, 0 updated, 7 unchanged" in again.stdout, again.stdout
    assert "sm-01 " in again.stdout and "ImportResult(" not in again.stdout


@pytest.fixture
def small(template: World, tmp_path: Path) -> Iterator[tuple[World, TestClient]]:
    w = clone_world(template, tmp_path)
    w.ctx.fabrics_settings = lambda: SETTINGS
    w.ctx.configure(ApiLimits(max_inventory_body=4096))
    with TestClient(create_app(w.ctx)) as client:
        yield w, client
    w.store.close()


def test_an_unknown_format_a_non_utf8_body_and_an_oversize_one_are_refused(small: tuple[World, TestClient]) -> None:
    w, client = small
    before = {n.name for n in w.store.nodes()}
    h = {**w.headers("admin"), "Content-Type": "text/plain"}
    r = client.post("/api/v1/inventory/nosuch", content=b"x", headers=h)
    assert r.status_code == 422 and r.json()["error"]["field"] == "format", r.text
    assert "ibnetdiscover" in r.json()["error"]["allowed"]
    r = client.post("/api/v1/inventory/ibnetdiscover", content=b"vendid=0x2c9\n\xff\xfe", headers=h)
    assert r.status_code == 422 and r.json()["error"]["field"] == "body", r.text
    r = client.post("/api/v1/inventory/ibnetdiscover", content=TOPO.read_bytes() * 4, headers=h)
    assert r.status_code == 413 and r.json()["error"]["field"] == "max_inventory_body", r.text
    r = client.post("/api/v1/inventory/ibnetdiscover?fabric=nosuch", content=TOPO.read_bytes()[:4000], headers=h)
    assert r.status_code == 422 and "nosuch" in r.text, r.text
    assert {n.name for n in w.store.nodes()} == before
    schema = client.get("/openapi.json", headers=w.headers("admin")).json()
    assert "text/plain" in schema["paths"]["/api/v1/inventory/{fmt}"]["post"]["requestBody"]["content"]


def test_held_changes_are_confirmed_through_the_api(served: tuple[World, str]) -> None:
    """``?confirm=PORT_GUID=NODE`` applies what the answer's ``pending`` names; a malformed or
    stray value is a 422 naming ``--confirm`` and writes nothing (issue 31, item 1)."""
    w, _ = served
    client = TestClient(create_app(w.ctx))
    h = {**w.headers("admin"), "Content-Type": "text/plain"}
    text = TOPO.read_text()
    assert client.post("/api/v1/inventory/ibnetdiscover", content=text, headers=h).status_code == 200
    moved = text.replace('"gpu-a01 mlx5_1"', '"gpu-a03 mlx5_7"')  # root on gpu-a01 rewrote its description
    doc = client.post("/api/v1/inventory/ibnetdiscover", content=moved, headers=h).json()
    (held,) = doc["pending"]
    assert (held["was"], held["node"], held["change"]) == ("gpu-a01", "gpu-a03", "move") and doc["result"]["updated"] == 0
    before = w.store.nodes()
    for bad in ("nonsense", f"{held['port_guid']}=gpu-a02"):
        r = client.post("/api/v1/inventory/ibnetdiscover", params={"confirm": bad}, content=moved, headers=h)
        assert r.status_code == 422 and r.json()["error"]["field"] == "--confirm", r.text
    assert w.store.nodes() == before
    r = client.post("/api/v1/inventory/ibnetdiscover", params={"confirm": held["confirm"]}, content=moved, headers=h)
    assert r.status_code == 200 and r.json()["pending"] == [] and r.json()["result"]["updated"] == 2, r.text
    assert held["port_guid"] in {str(p.port_guid) for p in all_ib_ports(w.store.node("gpu-a03"))}
