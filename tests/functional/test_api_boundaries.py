"""Boundaries that trust no caller (issue 18): an owner's lease into another tenant is only an
offer that tenant accepts; an empty network list is no networks; an attachment never takes a node
leased to another tenant; per-tenant quotas; refusals logged in the caller's own feed; an
inventory import never rewrites the ports of a leased node. Each refused call records nothing."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from gpufabric.domain.quotas import Quotas

from support.api_world import World, inventory


def _state(client: TestClient, w: World) -> tuple[Any, ...]:
    """Everything a refused call must leave as it was: moves, leases, nodes' states, networks."""
    admin = w.headers("admin")

    def get(path: str) -> list[dict[str, Any]]:
        return list(client.get(path, params={"limit": 1000}, headers=admin).json()["items"])

    return (
        [(m["id"], m["node"], m["to_tenant"], m["status"]) for m in get("/api/v1/moves")],
        [(x["id"], x["tenant"], x["node"], x["end"], tuple(x["networks"])) for x in get("/api/v1/leases")],
        [(n["name"], n["state"]) for n in get("/api/v1/nodes")],
        [(n["tenant"], n["name"]) for n in get("/api/v1/networks")],
    )


def test_an_owners_lease_into_another_tenant_is_an_offer_that_tenant_accepts(world: tuple[World, TestClient]) -> None:
    w, client = world
    r = client.post("/api/v1/leases", json={"tenant": "beta", "node": "gpu-0005"}, headers=w.headers("owner-alpha"))
    assert r.status_code == 202, r.text
    offer = r.json()
    assert (offer["status"], offer["networks"], offer["to_tenant"]) == ("offered", [], "beta")
    node = client.get("/api/v1/nodes/gpu-0005", headers=w.headers("admin")).json()
    assert node["state"] == "available"  # an offer changes nothing
    # the receiving tenant sees it; another tenant does not, and cannot accept it
    assert [m["id"] for m in client.get("/api/v1/offers", headers=w.headers("lessee-beta")).json()["items"]] == [offer["id"]]
    assert client.get("/api/v1/offers", headers=w.headers("lessee-alpha")).json()["items"] == []
    assert client.post(f"/api/v1/offers/{offer['id']}/accept", headers=w.headers("lessee-alpha")).status_code == 404
    assert client.post(f"/api/v1/offers/{offer['id']}/accept", headers=w.headers("service")).status_code == 403
    # no second grant of the node while the offer is open
    again = client.post("/api/v1/leases", json={"tenant": "alpha", "node": "gpu-0005"}, headers=w.headers("owner-alpha"))
    assert again.status_code == 409 and "open move" in again.json()["error"]["message"]
    ok = client.post(f"/api/v1/offers/{offer['id']}/accept", headers=w.headers("lessee-beta"))
    assert ok.status_code == 202 and ok.json()["status"] == "pending"
    assert client.get("/api/v1/nodes/gpu-0005", headers=w.headers("admin")).json()["state"] == "moving"
    twice = client.post(f"/api/v1/offers/{offer['id']}/accept", headers=w.headers("lessee-beta"))
    assert twice.status_code == 409 and "not an open offer" in twice.json()["error"]["message"]
    ev = client.get("/api/v1/events?limit=2", headers=w.headers("lessee-beta")).json()["items"]
    assert [(e["action"], e["outcome"], e["tenant"]) for e in ev] == [
        ("offer.accept", "error", "beta"), ("offer.accept", "ok", "beta")
    ]


def test_an_owner_withdraws_its_offer_and_the_node_stays_in_quarantine(world: tuple[World, TestClient]) -> None:
    w, client = world
    offer = client.post("/api/v1/leases", json={"tenant": "beta", "node": "gpu-0005"}, headers=w.headers("owner-alpha"))
    mid = offer.json()["id"]
    r = client.post(f"/api/v1/offers/{mid}/decline", headers=w.headers("owner-alpha"))
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    assert client.get("/api/v1/nodes/gpu-0005", headers=w.headers("admin")).json()["state"] == "available"
    # the node is free again: its owner may lease it to its own tenant at once (not an offer)
    own = client.post("/api/v1/leases", json={"tenant": "alpha", "node": "gpu-0005"}, headers=w.headers("owner-alpha"))
    assert own.status_code == 202 and own.json()["status"] == "pending"
    assert own.json()["networks"] == ["alpha-net", "shared-name"]  # its own tenant: omitted means all


def test_an_owner_naming_another_tenants_networks_is_refused_and_nothing_is_recorded(
    world: tuple[World, TestClient],
) -> None:
    w, client = world
    before = _state(client, w)
    for body in (
        {"tenant": "beta", "node": "gpu-0005", "networks": ["beta-net"]},
        {"tenant": "beta", "node": "gpu-0005", "networks": ["no-such-net"]},  # the same answer: no probing
    ):
        r = client.post("/api/v1/leases", json=body, headers=w.headers("owner-alpha"))
        assert r.status_code == 404 and r.json()["error"]["message"].startswith("network not found: beta/")
    assert _state(client, w) == before


def test_an_empty_network_list_means_no_networks(world: tuple[World, TestClient]) -> None:
    w, client = world
    admin = w.headers("admin")
    none = client.post("/api/v1/leases", json={"tenant": "alpha", "node": "gpu-0005", "networks": []}, headers=admin)
    assert none.status_code == 202 and none.json()["networks"] == []
    every = client.post("/api/v1/moves", json={"node": "gpu-0004", "to_tenant": "beta"}, headers=admin)
    assert every.status_code == 202 and every.json()["networks"] == ["beta-net", "shared-name"]


def test_an_attachment_never_takes_a_node_leased_to_another_tenant(world: tuple[World, TestClient]) -> None:
    w, client = world
    before = _state(client, w)
    for who in ("admin", "service"):  # the Neutron integration's token, or an operator
        r = client.post("/api/v1/nodes/gpu-0001/attachments", json={"network": "alpha-net", "tenant": "alpha"},
                        headers=w.headers(who))  # fmt: skip
        assert r.status_code == 409 and "leased to another tenant" in r.json()["error"]["message"], r.text
    assert _state(client, w) == before
    # a node in quarantine is attached (the move from quarantine)
    ok = client.post("/api/v1/nodes/gpu-0003/attachments", json={"network": "alpha-net", "tenant": "alpha"},
                     headers=w.headers("service"))  # fmt: skip
    assert ok.status_code == 202 and ok.json()["move"]["to_tenant"] == "alpha"


def test_quotas_refuse_with_429_naming_the_quota_and_change_nothing(world: tuple[World, TestClient]) -> None:
    w, client = world
    w.ctx.actions.quota = lambda: Quotas(networks=3, leases=1, open_moves=1)
    beta = w.headers("lessee-beta")
    # beta holds beta-net and shared-name: one more network is allowed, the next is refused
    assert client.post("/api/v1/networks", json={"name": "n1", "tenant": "beta"}, headers=beta).status_code == 201
    before = _state(client, w)
    r = client.post("/api/v1/networks", json={"name": "n2", "tenant": "beta"}, headers=beta)
    assert r.status_code == 429, r.text
    err = r.json()["error"]
    assert err["field"] == "quotas.networks" and err["allowed"] == "at most 3"
    assert "tenant beta holds 3 networks of its quota 3" in err["message"]
    assert _state(client, w) == before
    # alpha holds one lease (gpu-0000): its owner cannot lease it another node
    r = client.post("/api/v1/leases", json={"tenant": "alpha", "node": "gpu-0005"}, headers=w.headers("owner-alpha"))
    assert r.status_code == 429 and r.json()["error"]["field"] == "quotas.leases"
    assert _state(client, w) == before
    # an admin (the operator) is not counted
    assert client.post("/api/v1/networks", json={"name": "n3", "tenant": "beta"}, headers=w.headers("admin")).status_code == 201


def test_a_429_on_an_offer_tells_the_owner_none_of_the_other_tenants_numbers(world: tuple[World, TestClient]) -> None:
    """Issue 31: an owner's offer into a tenant at its lease quota was refused with that tenant's
    lease count and quota ("tenant beta holds 1 leases of its quota 1"); now the refusal names the
    quota only, and the tenant's own token still reads its numbers."""
    w, client = world
    w.ctx.actions.quota = lambda: Quotas(leases=1)
    before = _state(client, w)
    r = client.post("/api/v1/leases", json={"tenant": "beta", "node": "gpu-0005"}, headers=w.headers("owner-alpha"))
    assert r.status_code == 429, r.text
    err = r.json()["error"]
    assert err == {"code": "quota", "field": "quotas.leases", "value": None, "allowed": "within tenant beta's quota",
                   "message": "quota exceeded: tenant beta cannot take another lease now (quotas.leases in config.yaml)"}
    assert _state(client, w) == before
    own = client.post("/api/v1/networks", json={"name": "n1", "tenant": "beta"}, headers=w.headers("lessee-beta"))
    assert own.status_code == 201  # networks: within the default quota
    w.ctx.actions.quota = lambda: Quotas(networks=3)
    own = client.post("/api/v1/networks", json={"name": "n2", "tenant": "beta"}, headers=w.headers("lessee-beta"))
    assert own.status_code == 429 and own.json()["error"]["value"] == 4 and own.json()["error"]["allowed"] == "at most 3"


def test_a_refused_attempt_is_logged_in_the_callers_feed_not_the_named_tenants(world: tuple[World, TestClient]) -> None:
    w, client = world
    body = {"tenant": "beta", "node": "gpu-0005", "networks": ["beta-net"]}
    r = client.post("/api/v1/leases", json=body, headers=w.headers("owner-alpha"))
    assert r.status_code == 404
    beta_feed = client.get("/api/v1/events", headers=w.headers("lessee-beta")).json()["items"]
    assert [e for e in beta_feed if e["action"] == "lease.create"] == []
    alpha_feed = client.get("/api/v1/events", headers=w.headers("lessee-alpha")).json()["items"]
    assert [(e["action"], e["outcome"], e["tenant"]) for e in alpha_feed][:1] == [("lease.create", "error", "alpha")]


def test_an_import_never_rewrites_the_ports_of_a_leased_node(world: tuple[World, TestClient]) -> None:
    w, client = world
    admin = w.headers("admin")
    before = _state(client, w)
    ports = lambda n: client.get(f"/api/v1/nodes/{n}", headers=admin).json()["ports"]  # noqa: E731
    old = (ports("gpu-0000"), ports("gpu-0001"))
    inv = inventory(6)
    a, b = inv["nodes"][0], inv["nodes"][1]  # alpha's and beta's leased nodes swap an Ethernet port
    a["ethernet"][0], b["ethernet"][0] = b["ethernet"][0], a["ethernet"][0]
    r = client.post("/api/v1/inventory", json=inv, headers=admin)
    assert r.status_code == 409, r.text
    assert "gpu-0000 is leased" in r.json()["error"]["message"]
    assert (ports("gpu-0000"), ports("gpu-0001")) == old and _state(client, w) == before
    # nodes in quarantine may swap ports: no tenant is involved
    inv = inventory(6)
    c, d = inv["nodes"][2], inv["nodes"][3]
    c["ethernet"][0], d["ethernet"][0] = d["ethernet"][0], c["ethernet"][0]
    r = client.post("/api/v1/inventory", json=inv, headers=admin)
    assert r.status_code == 200 and r.json()["updated"] == 2, r.text


def test_a_leased_node_answers_the_same_whatever_tenant_is_named(world: tuple[World, TestClient]) -> None:
    """No probing tenant names with 404 vs 409: the node's own refusal comes first."""
    from datetime import UTC, datetime

    from gpufabric.domain.models import Lease, NodeState

    w, client = world
    w.store.create_lease(Lease("beta", "gpu-0005", datetime.now(UTC), None, ("beta-net",)))
    w.store.set_node_state("gpu-0005", NodeState.LEASED)
    owner = w.headers("owner-alpha")
    answers = {
        t: client.post("/api/v1/leases", json={"tenant": t, "node": "gpu-0005"}, headers=owner) for t in ("beta", "nosuch")
    }
    assert {t: r.status_code for t, r in answers.items()} == {"beta": 409, "nosuch": 409}
    assert all("gpu-0005 is leased" in r.json()["error"]["message"] for r in answers.values())
