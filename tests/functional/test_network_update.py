"""A tenant network is updated, not only created and deleted (issue 31 item 11, NVIDIA NCP
SDN01-03 "update a VPC"): ``PATCH /api/v1/networks/{tenant}/{name}`` and ``gpufabric network
update`` change its name, description and tags; its tenant and segments are not updatable (a
422 naming the field). Bad input is one error naming the field and what is allowed, and nothing
is written; a rename carries the leases and the moves still to start that join the network."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.models import Network
from gpufabric.workflow.actions import Actions

from support.api_world import World, build_world
from support.live_api import gf, live_api

NET = "/api/v1/networks/alpha/alpha-net"


def _events(client: TestClient, w: World, action: str) -> list[dict[str, Any]]:
    got = client.get("/api/v1/events", params={"limit": 1000}, headers=w.headers("admin")).json()["items"]
    return [e for e in got if e["action"] == action]


def test_patch_renames_describes_and_tags_a_network_keeping_its_segments(world: tuple[World, TestClient]) -> None:
    w, client = world
    before = client.get(NET, headers=w.headers("admin")).json()
    assert (before["description"], before["tags"]) == ("", [])
    body = {"name": "alpha-prod", "description": "Training VPC (rack 4)", "tags": ["env=prod", "team:ml", "env=prod"]}
    r = client.patch(NET, json=body, headers=w.headers("lessee-alpha"))  # the tenant's own token, as for delete
    assert r.status_code == 200, r.text
    got = r.json()
    assert (got["name"], got["tenant"], got["description"]) == ("alpha-prod", "alpha", "Training VPC (rack 4)")
    assert got["tags"] == ["env=prod", "team:ml"]  # in order, the repeat dropped
    assert got["segments"] == before["segments"]  # the same VLAN and PKey: nothing on a fabric changes
    assert client.get(NET, headers=w.headers("admin")).status_code == 404
    assert client.get("/api/v1/networks/alpha/alpha-prod", headers=w.headers("admin")).json() == got
    lease = client.get(f"/api/v1/leases/{w.leases['gpu-0000']}", headers=w.headers("admin")).json()
    assert lease["networks"] == ["alpha-prod"]  # a lease holds its networks by row: renamed with it
    only_tags = client.patch("/api/v1/networks/alpha/alpha-prod", json={"tags": []}, headers=w.headers("admin")).json()
    assert (only_tags["tags"], only_tags["description"], only_tags["name"]) == ([], "Training VPC (rack 4)", "alpha-prod")
    ev = _events(client, w, "network.update")
    assert [(e["target"], e["outcome"], e["tenant"]) for e in ev] == [
        ("alpha/alpha-prod", "ok", "alpha"), ("alpha/alpha-net", "ok", "alpha")]  # fmt: skip


def test_create_takes_a_description_and_tags(world: tuple[World, TestClient]) -> None:
    w, client = world
    r = client.post("/api/v1/networks", headers=w.headers("lessee-beta"),
                    json={"name": "vpc-1", "tenant": "beta", "description": "the VPC", "tags": ["a", "b"]})  # fmt: skip
    assert r.status_code == 201, r.text
    assert (r.json()["description"], r.json()["tags"]) == ("the VPC", ["a", "b"])
    listed = client.get("/api/v1/networks?tenant=beta", headers=w.headers("lessee-beta")).json()["items"]
    assert [(n["name"], n["description"], n["tags"]) for n in listed if n["name"] == "vpc-1"] == [("vpc-1", "the VPC", ["a", "b"])]


BAD: list[tuple[dict[str, Any], int, str, str]] = [
    ({"name": ""}, 422, "name", "String should have at least 1 character"),
    ({"name": "Bad Name"}, 422, "name", "String should match pattern"),
    ({"name": "shared-name"}, 409, "name", "a name no other network of tenant alpha has"),
    ({"description": "x" * 256}, 422, "description", "at most 255 characters"),
    ({"description": "two\nlines"}, 422, "description", "String should match pattern"),
    ({"tags": ["ok", "has space"]}, 422, "tags.1", "String should match pattern"),
    ({"tags": ["t" * 61]}, 422, "tags.0", "at most 60 characters"),
    ({"tags": [f"t{i}" for i in range(33)]}, 422, "tags", "at most 32 items"),
    ({"segments": [{"fabric": "ethernet", "seg_id": 2999}]}, 422, "segments", "not updatable"),
    ({"tenant": "beta"}, 422, "tenant", "not updatable"),
    ({"options": {"infiniband": {"mtu": 4}}}, 422, "options", "not updatable"),
    ({"name": "alpha-2", "fabrics": ["infiniband"]}, 422, "fabrics", "not updatable"),
]


@pytest.mark.parametrize(("body", "status", "field", "allowed"), BAD, ids=[json.dumps(b)[:40] for b, *_ in BAD])
def test_bad_input_names_the_field_and_writes_nothing(
    world: tuple[World, TestClient], body: dict[str, Any], status: int, field: str, allowed: str
) -> None:
    w, client = world
    client.patch(NET, json={"description": "kept", "tags": ["kept"]}, headers=w.headers("admin"))
    before = client.get("/api/v1/networks", params={"limit": 1000}, headers=w.headers("admin")).json()
    r = client.patch(NET, json=body, headers=w.headers("admin"))
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["field"] == field and allowed in err["allowed"], err
    assert "\n" not in err["message"] and err["message"].startswith("invalid" if status == 422 else "network")
    assert client.get("/api/v1/networks", params={"limit": 1000}, headers=w.headers("admin")).json() == before


@pytest.mark.parametrize("raw", ['{"description": "\\ud800"}', '{"tags": ["\\udfff"]}'])
def test_a_lone_surrogate_is_a_422_naming_the_field_not_a_500(world: tuple[World, TestClient], raw: str) -> None:
    """JSON may escape half a UTF-16 pair, which no store (and no JSON answer) can hold: the
    error answer echoed it and failed to encode (a 500)."""
    w, client = world
    r = client.patch(NET, content=raw, headers={**w.headers("admin"), "content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] in ("description", "tags.0") and "\\ud" in r.json()["error"]["value"]


@pytest.mark.parametrize(
    ("who", "status"),
    [("admin", 200), ("owner-alpha", 200), ("lessee-alpha", 200), ("service", 200), ("lessee-beta", 404), ("none", 401)],
)
def test_who_may_update_a_network_as_who_may_delete_it(world: tuple[World, TestClient], who: str, status: int) -> None:
    w, client = world
    headers = {} if who == "none" else w.headers(who)
    r = client.patch(NET, json={"description": f"by {who}"}, headers=headers)
    assert r.status_code == status, r.text
    shown = client.get(NET, headers=w.headers("admin")).json()["description"]
    assert shown == (f"by {who}" if status == 200 else "")


def test_a_rename_carries_the_moves_still_to_start_that_join_it(tmp_path: Path) -> None:
    """A move names its networks (its lease starts at the swap); one queued before the rename
    joins the renamed network, not a name that no longer exists (its swap would fail)."""
    w = build_world(tmp_path, nodes=4, leased=0)
    act = Actions(w.store, w.ctx.segment_config)
    queued = act.request_move(LOCAL_ADMIN, "gpu-0002", "alpha", ("alpha-net", "shared-name"))
    done_before = w.store.network("alpha-net", "alpha")
    act.update_network(LOCAL_ADMIN, "alpha-net", "alpha", "alpha-vpc")
    from gpufabric.store.moves import MoveLedger

    assert MoveLedger(w.store).get(queued.id or 0).networks == ("alpha-vpc", "shared-name")
    assert w.store.network("alpha-vpc", "alpha").segments == done_before.segments


def test_the_cli_updates_a_network_here_and_through_the_api(tmp_path: Path) -> None:
    w = build_world(tmp_path, nodes=2, leased=0)
    remote_home = tmp_path / "remote"
    remote_home.mkdir()

    def run(*args: str, remote: str | None = None) -> Any:
        p = gf(remote_home, "--api", remote, *args, GPUFABRIC_TOKEN=w.tokens["admin"]) if remote else gf(tmp_path, *args)
        return p

    here = run("network", "update", "alpha-net", "--tenant", "alpha", "--name", "alpha-vpc", "--description", "d1",
               "--tag", "x", "--tag", "y", "--json")  # fmt: skip
    assert here.returncode == 0, here.stderr
    local = json.loads(here.stdout)
    assert (local["name"], local["description"], local["tags"]) == ("alpha-vpc", "d1", ["x", "y"])
    with live_api(w.ctx) as base:
        there = run("network", "update", "beta-net", "--tenant", "beta", "--description", "d2", "--tag", "z",
                    "--json", remote=base)  # fmt: skip
        assert there.returncode == 0, there.stderr
        remote = json.loads(there.stdout)
        assert set(remote) == set(local) and (remote["name"], remote["description"], remote["tags"]) == ("beta-net", "d2", ["z"])
        cleared = json.loads(run("network", "update", "alpha-vpc", "--tenant", "alpha", "--no-tags", "--json", remote=base).stdout)
        assert (cleared["tags"], cleared["description"]) == ([], "d1")
        refused = run("network", "update", "beta-net", "--tenant", "beta", "--name", "shared-name", remote=base)
        assert refused.returncode != 0 and "shared-name" in refused.stderr
    for bad, option in ((("--name", ""), "--name"), (("--description", "x" * 300), "--description"),
                        (("--tag", "no spaces"), "--tag")):  # fmt: skip
        p = run("network", "update", "alpha-vpc", "--tenant", "alpha", *bad)
        assert p.returncode == 2, p.stdout + p.stderr
        lines = [x for x in p.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and f"invalid {option}" in lines[0], p.stderr
    made = json.loads(run("network", "create", "vpc-2", "--tenant", "beta", "--description", "made", "--tag", "t1", "--json").stdout)
    assert (made["description"], made["tags"]) == ("made", ["t1"])
    assert w.store.network("alpha-vpc", "alpha") == Network(
        "alpha-vpc", "alpha", w.store.network("alpha-vpc", "alpha").segments, "d1", ()
    )  # the refused updates wrote nothing


def test_network_list_shows_description_and_tags_cut_to_a_narrow_table(tmp_path: Path) -> None:
    """``network list``'s table has the description and tags its ``--json`` has (issue 31's
    leftovers, item 2); a long description ends in an ellipsis, whole in ``--json``."""
    w = build_world(tmp_path, nodes=2, leased=0)
    long = "Training VPC for the vision team, rack 4 and rack 5, until the end of the quarter"
    act = Actions(w.store, w.ctx.segment_config)
    act.update_network(LOCAL_ADMIN, "alpha-net", "alpha", description="Training VPC (rack 4)", tags=["env=prod", "team:ml"])
    act.update_network(LOCAL_ADMIN, "beta-net", "beta", description=long)
    listed = gf(tmp_path, "network", "list", COLUMNS="200")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split("│")[1].strip(): line for line in listed.stdout.splitlines() if line.count("│") > 3}
    assert "description" in listed.stdout and "tags" in listed.stdout
    assert "Training VPC (rack 4)" in rows["alpha-net"] and "env=prod, team:ml" in rows["alpha-net"]
    assert "Training VPC for the vision tea…" in rows["beta-net"] and long not in listed.stdout
    assert max(len(line) for line in listed.stdout.splitlines()) < 140  # narrow, though the terminal is wide
    whole = {n["name"]: n for n in json.loads(gf(tmp_path, "network", "list", "--json").stdout)}
    assert whole["beta-net"]["description"] == long
