"""The authorization matrix of API v1: every role x resource x verb, including other
tenants' objects (404: as if they did not exist), plus 401 without or with a revoked token,
the error shape, 405 with Allow, ETags, and the event log of every write."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gpufabric.api.app import create_app
from gpufabric.api.deps import ApiContext
from gpufabric.api.limits import ApiLimits
from gpufabric.domain.moves import MovePhase
from gpufabric.engine.fabrics import network_kinds
from gpufabric.runtime.loops import MoveProgress
from gpufabric.store.moves import MoveLedger
from gpufabric.store.registry import Registry, parse_segments

from support.api_world import World, clone_world

ROLES = ("admin", "owner-alpha", "lessee-alpha", "lessee-beta", "service", "none")


def _h(w: World, who: str) -> dict[str, str]:
    return {} if who == "none" else w.headers(who)


# (method, path, body) -> expected status for admin, owner-alpha, lessee-alpha, lessee-beta, none
MATRIX: list[tuple[str, str, dict[str, Any] | None, tuple[int, int, int, int, int, int]]] = [
    ("GET", "/api/v1/nodes", None, (200, 200, 200, 200, 200, 401)),
    ("GET", "/api/v1/nodes/gpu-0000", None, (200, 404, 200, 404, 200, 401)),  # alpha's leased node
    ("GET", "/api/v1/nodes/gpu-0001", None, (200, 404, 404, 200, 200, 401)),  # beta's
    ("GET", "/api/v1/nodes/gpu-0005", None, (200, 200, 404, 404, 200, 401)),  # owned by alpha, not leased
    ("PUT", "/api/v1/nodes/gpu-0003/owner", {"owner": "beta"}, (200, 403, 403, 403, 403, 401)),
    ("POST", "/api/v1/inventory", {"version": 1, "nodes": []}, (200, 403, 403, 403, 403, 401)),
    ("GET", "/api/v1/tenants", None, (200, 200, 200, 200, 200, 401)),
    ("GET", "/api/v1/tenants/beta", None, (200, 404, 404, 200, 200, 401)),
    ("POST", "/api/v1/tenants", {"name": "gamma"}, (201, 403, 403, 403, 201, 401)),
    ("DELETE", "/api/v1/tenants/beta", None, (409, 404, 404, 403, 403, 401)),
    ("GET", "/api/v1/networks/beta/beta-net", None, (200, 404, 404, 200, 200, 401)),
    ("GET", "/api/v1/networks/alpha/shared-name", None, (200, 200, 200, 404, 200, 401)),
    ("POST", "/api/v1/networks", {"name": "n2", "tenant": "beta"}, (201, 404, 404, 201, 201, 401)),
    ("POST", "/api/v1/networks", {"name": "n3", "tenant": "beta", "segments": [{"fabric": "ethernet", "seg_id": 2900}]},
     (201, 404, 404, 403, 201, 401)),
    ("DELETE", "/api/v1/networks/beta/beta-net", None, (409, 404, 404, 409, 409, 401)),  # lease 2 uses it
    ("GET", "/api/v1/offerings/openstack", None, (200, 200, 200, 200, 200, 401)),
    ("GET", "/api/v1/leases/2", None, (200, 404, 404, 200, 200, 401)),
    ("POST", "/api/v1/leases", {"tenant": "alpha", "node": "gpu-0005"}, (202, 202, 404, 404, 202, 401)),
    ("POST", "/api/v1/leases", {"tenant": "beta", "node": "gpu-0004"}, (202, 404, 404, 404, 202, 401)),
    ("DELETE", "/api/v1/leases/2", None, (202, 404, 404, 202, 202, 401)),
    ("DELETE", "/api/v1/leases/1", None, (202, 202, 202, 404, 202, 401)),
    ("POST", "/api/v1/moves", {"node": "gpu-0003", "to_tenant": "beta"}, (202, 404, 404, 404, 403, 401)),
    ("POST", "/api/v1/moves", {"node": "gpu-0001", "to_tenant": "quarantine"}, (202, 404, 404, 403, 403, 401)),
    ("POST", "/api/v1/nodes/gpu-0001/attachments", {"network": "shared-name", "tenant": "beta"}, (202, 404, 404, 202, 202, 401)),
    ("POST", "/api/v1/nodes/gpu-0001/attachments", {"network": "alpha-net", "tenant": "alpha"}, (409, 404, 404, 404, 409, 401)),
    ("DELETE", "/api/v1/nodes/gpu-0001/attachments/beta-net", None, (202, 404, 404, 202, 202, 401)),
    ("GET", "/api/v1/ports/lookup?guid=0x0002c90300010002", None, (200, 404, 404, 200, 200, 401)),
    ("GET", "/api/v1/events", None, (200, 200, 200, 200, 200, 401)),
    ("GET", "/api/v1/tokens", None, (200, 403, 403, 403, 403, 401)),
    ("POST", "/api/v1/tokens", {"name": "x", "role": "lessee", "tenant": "beta"}, (201, 403, 403, 403, 403, 401)),
    ("DELETE", "/api/v1/tokens/4", None, (200, 403, 403, 403, 403, 401)),
    ("POST", "/api/v1/audit", None, (503, 403, 403, 403, 403, 401)),  # no fabrics configured here
    ("GET", "/api/v1/audit", None, (404, 403, 403, 403, 403, 401)),
    ("GET", "/api/v1/reconcile", None, (200, 403, 403, 403, 200, 401)),  # the Neutron driver waits for converge
    ("POST", "/api/v1/moves/batch", {"nodes": ["gpu-0003", "gpu-0004"], "to_tenant": "beta"}, (202, 404, 404, 404, 403, 401)),
    # all or none: each lessee sees one of the two
    ("POST", "/api/v1/moves/batch", {"nodes": ["gpu-0000", "gpu-0001"], "to_tenant": "quarantine"},
     (202, 404, 404, 404, 403, 401)),
    ("POST", "/api/v1/moves/preview", {"node": "gpu-0001", "to_tenant": "alpha"}, (503, 404, 404, 403, 403, 401)),
    # cross-tenant: an owner into another tenant's networks (refused; without networks it is only an offer),
    # a lessee on another tenant's node, an integration (Neutron project A) attaching B's leased node
    ("POST", "/api/v1/leases", {"tenant": "beta", "node": "gpu-0005", "networks": ["beta-net"]},
     (202, 404, 404, 404, 202, 401)),
    ("POST", "/api/v1/leases", {"tenant": "beta", "node": "gpu-0005"}, (202, 202, 404, 404, 202, 401)),
    ("DELETE", "/api/v1/nodes/gpu-0000/attachments/alpha-net", None, (202, 404, 202, 404, 202, 401)),
    ("POST", "/api/v1/nodes/gpu-0000/attachments", {"network": "beta-net", "tenant": "beta"}, (409, 404, 404, 404, 409, 401)),
    ("GET", "/api/v1/offers", None, (200, 200, 200, 200, 200, 401)),
    ("POST", "/api/v1/offers/99/accept", None, (404, 404, 404, 404, 403, 401)),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "expected"), MATRIX, ids=[f"{m} {p} {b or ''}"[:80] for m, p, b, _ in MATRIX]
)
@pytest.mark.parametrize("who", range(len(ROLES)), ids=list(ROLES))
def test_authorization_matrix(
    world: tuple[World, TestClient], who: int, method: str, path: str, body: dict[str, Any] | None,
    expected: tuple[int, ...],
) -> None:
    w, client = world
    r = client.request(method, path, json=body, headers=_h(w, ROLES[who]))
    assert r.status_code == expected[who], r.text
    if r.status_code >= 400:
        err = r.json()["error"]
        assert set(err) == {"code", "field", "value", "allowed", "message"} and err["message"]
    if r.status_code == 401:
        assert r.headers["www-authenticate"] == "Bearer"


def test_lists_show_a_lessee_only_its_own(world: tuple[World, TestClient]) -> None:
    w, client = world
    def names(path: str, who: str, key: str = "name") -> list[Any]:
        return [x[key] for x in client.get(path, headers=w.headers(who)).json()["items"]]

    assert names("/api/v1/nodes", "lessee-alpha") == ["gpu-0000"]
    assert names("/api/v1/nodes", "lessee-beta") == ["gpu-0001"]
    assert names("/api/v1/nodes", "owner-alpha") == ["gpu-0005"]
    assert len(names("/api/v1/nodes", "admin")) == 6
    assert names("/api/v1/tenants", "lessee-beta") == ["beta"]
    assert names("/api/v1/networks", "lessee-beta") == ["beta-net", "shared-name"]
    assert names("/api/v1/leases", "lessee-beta", "id") == [w.leases["gpu-0001"]]
    assert {e["tenant"] for e in client.get("/api/v1/events", headers=w.headers("lessee-beta")).json()["items"]} == {"beta"}
    # filters and paging
    assert names("/api/v1/nodes?tenant=quarantine&limit=2&offset=1", "admin") == ["gpu-0003", "gpu-0004"]
    assert client.get("/api/v1/nodes?limit=2", headers=w.headers("admin")).json()["total"] == 6


def test_revoked_token_is_refused_and_every_write_is_logged(world: tuple[World, TestClient]) -> None:
    w, client = world
    admin = w.headers("admin")
    r = client.post("/api/v1/tenants", json={"name": "alpha"}, headers=admin)
    assert r.status_code == 409
    tokens = client.get("/api/v1/tokens", headers=admin).json()["items"]
    beta = next(t for t in tokens if t["name"] == "beta-user")
    assert "secret" not in beta
    assert client.delete(f"/api/v1/tokens/{beta['id']}", headers=admin).status_code == 200
    assert client.get("/api/v1/nodes", headers=w.headers("lessee-beta")).status_code == 401
    ev = client.get("/api/v1/events?limit=2", headers=admin).json()["items"]
    assert [(e["action"], e["outcome"], e["actor"]) for e in ev] == [
        ("token.revoke", "ok", "ops"),
        ("tenant.create", "error", "ops"),
    ]
    assert "already exists" in ev[1]["message"]


def test_405_names_allowed_methods_and_etag_gives_304(world: tuple[World, TestClient]) -> None:
    w, client = world
    r = client.put("/api/v1/leases", headers=w.headers("admin"))
    assert r.status_code == 405 and r.headers["allow"] == "GET, POST"
    assert r.json()["error"]["code"] == "method_not_allowed"
    first = client.get("/api/v1/nodes", headers=w.headers("admin"))
    etag = first.headers["etag"]
    again = client.get("/api/v1/nodes", headers={**w.headers("admin"), "If-None-Match": etag})
    assert again.status_code == 304
    client.post("/api/v1/tenants", json={"name": "gamma"}, headers=w.headers("admin"))
    changed = client.get("/api/v1/tenants", headers={**w.headers("admin"), "If-None-Match": etag})
    assert changed.status_code == 200 and "gamma" in changed.text


def test_adopted_segments_are_checked_against_ranges_and_each_other(world: tuple[World, TestClient]) -> None:
    w, client = world
    admin = w.headers("admin")
    body = {"name": "neutron-1", "tenant": "beta", "segments": [{"fabric": "ethernet", "seg_id": 2500},
                                                                 {"fabric": "infiniband", "seg_id": 3100}]}
    made = client.post("/api/v1/networks", json=body, headers=admin)
    assert made.status_code == 201
    assert {s["fabric"]: s["seg_id"] for s in made.json()["segments"]} == {"ethernet": 2500, "infiniband": 3100}
    dup = client.post("/api/v1/networks", json={**body, "name": "neutron-2"}, headers=admin)
    assert dup.status_code == 409
    out = client.post(
        "/api/v1/networks",
        json={"name": "neutron-3", "tenant": "beta", "segments": [{"fabric": "ethernet", "seg_id": 5}]},
        headers=admin,
    )
    assert out.status_code == 422 and out.json()["error"]["allowed"] == "2000-2999"


def test_an_adopted_network_gets_only_the_segments_it_names(world: tuple[World, TestClient]) -> None:
    """The seed's "create_vlan runs on every switch": an IB network from Neutron takes no VLAN,
    an Ethernet one no PKey."""
    w, client = world
    admin = w.headers("admin")
    ib = client.post("/api/v1/networks", headers=admin, json={"name": "neutron-ib", "tenant": "beta",
                                                             "segments": [{"fabric": "infiniband", "seg_id": 3200}]})  # fmt: skip
    eth = client.post("/api/v1/networks", headers=admin, json={"name": "neutron-eth", "tenant": "beta",
                                                              "segments": [{"fabric": "ethernet", "seg_id": 2600}]})  # fmt: skip
    assert ib.status_code == eth.status_code == 201
    assert [(x["fabric"], x["seg_id"]) for x in ib.json()["segments"]] == [("infiniband", 3200)]
    assert [(x["fabric"], x["seg_id"]) for x in eth.json()["segments"]] == [("ethernet", 2600)]


def test_a_network_spans_the_fabric_instances_it_names(world: tuple[World, TestClient]) -> None:
    """``fabrics`` (issue 20): a lessee's network on the InfiniBand instance only; an unknown
    instance, or one whose kind gives networks no segment, is a 422 naming ``fabrics`` with
    nothing written."""
    w, client = world
    lessee = w.headers("lessee-beta")
    made = client.post(
        "/api/v1/networks", headers=lessee, json={"name": "ib-only", "tenant": "beta", "fabrics": ["infiniband"]}
    )
    assert made.status_code == 201, made.text
    assert [x["fabric"] for x in made.json()["segments"]] == ["infiniband"]
    for bad, value in ((["infiniband", "ib-nope"], "ib-nope"), (["nvlink"], "nvlink"), ([], None)):
        r = client.post("/api/v1/networks", headers=lessee, json={"name": "bad", "tenant": "beta", "fabrics": bad})
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert "fabrics" in err["field"] and "\n" not in err["message"]
        if value is not None:
            assert (err["field"], err["value"]) == ("fabrics", value)
            assert err["allowed"] == "configured fabric instances: ethernet, infiniband"
    names = [n["name"] for n in client.get("/api/v1/networks?tenant=beta", headers=lessee).json()["items"]]
    assert "ib-only" in names and "bad" not in names


def test_a_network_carries_its_own_options_per_instance(world: tuple[World, TestClient]) -> None:
    """``options`` (issue 20 item 4): a lessee's network with its own IPoIB MTU and rate on the
    InfiniBand instance (201, echoed per segment); a value out of range, an unknown key, an
    option on Ethernet or a bool where an integer goes is a 422 naming the field, nothing written."""
    w, client = world
    lessee = w.headers("lessee-beta")
    body = {"name": "tuned", "tenant": "beta", "options": {"infiniband": {"mtu": 5, "rate": 16}}}
    made = client.post("/api/v1/networks", headers=lessee, json=body)
    assert made.status_code == 201, made.text
    segs = {x["fabric"]: x for x in made.json()["segments"]}
    assert segs["infiniband"]["options"] == {"mtu": 5, "rate": 16} and "options" not in segs["ethernet"]
    for opts, field in (({"infiniband": {"mtu": 6}}, "options.infiniband.mtu"),
                        ({"infiniband": {"speed": 1}}, "options.infiniband.speed"),
                        ({"ethernet": {"mtu": 9000}}, "options.ethernet"),
                        ({"infiniband": {"mtu": "5"}}, "options.infiniband.mtu")):  # fmt: skip
        r = client.post("/api/v1/networks", headers=lessee, json={"name": "bad", "tenant": "beta", "options": opts})
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["field"].startswith(field) and "\n" not in err["message"], (opts, err)
    names = [n["name"] for n in client.get("/api/v1/networks?tenant=beta", headers=lessee).json()["items"]]
    assert "tuned" in names and "bad" not in names


def test_neutron_adopts_one_segment_per_ib_instance(template: World, tmp_path: Path) -> None:
    """Issue 20: two IB subnets (``ib-compute``, ``ib-storage``); Neutron's physnets map to them."""
    w = clone_world(template, tmp_path)
    kinds = network_kinds({"fabrics": [{"name": "ib-compute", "kind": "infiniband"},
                                       {"name": "ib-storage", "kind": "infiniband"}]}, Registry.from_entry_points())  # fmt: skip
    ctx = ApiContext(w.store, lambda: parse_segments(), network_kinds=lambda: kinds)
    svc = w.headers("service")
    with TestClient(create_app(ctx)) as client:
        body = {"name": "neutron-ib", "tenant": "beta",
                "segments": [{"fabric": "ib-compute", "seg_id": 3300}, {"fabric": "ib-storage", "seg_id": 3301}]}  # fmt: skip
        made = client.post("/api/v1/networks", json=body, headers=svc)
        assert made.status_code == 201, made.text
        assert [(x["fabric"], x["seg_id"], x["pkey"]) for x in made.json()["segments"]] == [
            ("ib-compute", 3300, "0x0b2c"), ("ib-storage", 3301, "0x0b2d")]  # fmt: skip
        taken = client.post("/api/v1/networks", headers=svc, json={
            "name": "neutron-2", "tenant": "beta", "segments": [{"fabric": "ib-storage", "seg_id": 3300}]})  # fmt: skip
        assert taken.status_code == 409 and taken.json()["error"]["message"] == "ib-storage segment 3300 is already used"
        unknown = client.post("/api/v1/networks", headers=svc, json={
            "name": "neutron-3", "tenant": "beta", "segments": [{"fabric": "infiniband", "seg_id": 3400}]})  # fmt: skip
        assert unknown.status_code == 422
        assert unknown.json()["error"]["allowed"] == "ethernet, ib-compute or ib-storage"
        twice = client.post("/api/v1/networks", headers=svc, json={
            "name": "neutron-4", "tenant": "beta",
            "segments": [{"fabric": "ib-storage", "seg_id": 3500}, {"fabric": "ib-storage", "seg_id": 3501}]})  # fmt: skip
        assert twice.status_code == 422 and "two segments on fabric instance ib-storage" in twice.json()["error"]["message"]
        names = [n["name"] for n in client.get("/api/v1/networks?tenant=beta", headers=svc).json()["items"]]
        assert "neutron-ib" in names and not {"neutron-2", "neutron-3", "neutron-4"} & set(names)
    w.store.close()


def test_tenant_delete_names_what_uses_it(world: tuple[World, TestClient]) -> None:
    w, client = world
    r = client.delete("/api/v1/tenants/beta", headers=w.headers("admin"))
    assert r.status_code == 409
    assert r.json()["error"]["message"] == (
        f"tenant beta is still used by lease(s) {w.leases['gpu-0001']} and network(s) beta-net, shared-name"
    )
    client.post("/api/v1/tenants", json={"name": "gamma"}, headers=w.headers("admin"))
    assert client.delete("/api/v1/tenants/gamma", headers=w.headers("admin")).status_code == 200


def test_a_batch_of_moves_is_recorded_with_its_events_or_not_at_all(world: tuple[World, TestClient]) -> None:
    w, client = world
    admin = w.headers("admin")
    refused = client.post("/api/v1/moves/batch", headers=admin,
                          json={"nodes": ["gpu-0003", "gpu-0001", "nope"], "to_tenant": "alpha"})  # fmt: skip
    assert refused.status_code == 404 and refused.json()["error"]["value"] == "nope"
    assert client.get("/api/v1/moves", headers=admin).json()["total"] == 0
    made = client.post("/api/v1/moves/batch", headers=admin, json={"nodes": ["gpu-0003", "gpu-0004"], "to_tenant": "beta"})
    assert made.status_code == 202
    moved = [(m["node"], m["from_tenant"], m["to_tenant"], m["status"]) for m in made.json()["items"]]
    assert moved == [("gpu-0003", "quarantine", "beta", "pending"), ("gpu-0004", "quarantine", "beta", "pending")]
    ev = client.get("/api/v1/events?limit=3", headers=admin).json()["items"]
    assert [(e["action"], e["target"], e["outcome"]) for e in ev] == [
        ("move.create", "gpu-0004", "ok"), ("move.create", "gpu-0003", "ok"),
        ("move.create", "gpu-0003,gpu-0001,nope", "error")]  # fmt: skip
    dup = client.post("/api/v1/moves/batch", headers=admin, json={"nodes": ["gpu-0002", "gpu-0002"], "to_tenant": "beta"})
    assert dup.status_code == 422 and dup.json()["error"]["field"] == "nodes"


@pytest.mark.timeout(60)
def test_a_move_stream_ends_when_this_servers_worker_rings_not_at_the_next_poll(
    world: tuple[World, TestClient],
) -> None:
    """The stream polls every minute here: only the worker's ring (MoveProgress.on_record) can end the
    stream within the test's timeout."""
    w, client = world
    w.ctx.configure(ApiLimits(stream_poll_min=60.0, stream_poll_max=600.0))
    admin = w.headers("admin")
    move = client.post("/api/v1/moves", json={"node": "gpu-0003", "to_tenant": "beta"}, headers=admin).json()
    ledger = MoveLedger(w.store)
    progress = MoveProgress(w.store, "srv:1:serve", on_record=w.ctx.ring)

    def worker() -> None:
        while not w.ctx._listeners:  # the stream below has read once and waits
            time.sleep(0.01)
        (m,) = ledger.claim("srv:1:serve")
        m = ledger.swap_leases([m])[0]
        ledger.set_phases([m], MovePhase.DONE)
        progress.record(move["id"], "done", "move done")

    t = threading.Thread(target=worker)
    t.start()
    kinds = []
    with client.stream("GET", f"/api/v1/moves/{move['id']}/events", headers=admin) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and kinds[-1:] == ["move"]:
                last = json.loads(line[6:])
            if line.startswith("event: "):
                kinds.append(line[7:])
    t.join()
    assert kinds[0] == "move" and last["status"] == "done"
