"""An offer is its owner's, and a tenant's name carries nothing over (issue 31, item 12).

- A change of a node's owner withdraws the node's open offers (the old owner's grants): the
  receiving tenant can no longer accept one, and an ``offer.withdraw`` event says why.
- A tenant that owns nodes is not deleted (409 naming them): its owner is changed first, which
  withdraws its offers. Deleting a tenant withdraws the offers made into it, so a tenant
  re-created under the same name receives none of them, and owns nothing.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from support.api_world import World


def _move(client: TestClient, w: World, move_id: int) -> dict[str, Any]:
    r = client.get(f"/api/v1/moves/{move_id}", headers=w.headers("admin"))
    assert r.status_code == 200, r.text
    return dict(r.json())


def _events(client: TestClient, w: World, action: str) -> list[dict[str, Any]]:
    items = client.get("/api/v1/events?limit=100", headers=w.headers("admin")).json()["items"]
    return [e for e in items if e["action"] == action]


def test_a_change_of_owner_withdraws_the_old_owners_offers(world: tuple[World, TestClient]) -> None:
    w, client = world
    admin = w.headers("admin")
    offer = client.post("/api/v1/leases", json={"tenant": "beta", "node": "gpu-0005"}, headers=w.headers("owner-alpha"))
    assert offer.status_code == 202 and offer.json()["status"] == "offered", offer.text
    mid = offer.json()["id"]
    same = client.put("/api/v1/nodes/gpu-0005/owner", json={"owner": "alpha"}, headers=admin)  # no change: kept
    assert same.status_code == 200 and _move(client, w, mid)["status"] == "offered"
    r = client.put("/api/v1/nodes/gpu-0005/owner", json={"owner": "beta"}, headers=admin)
    assert r.status_code == 200, r.text
    got = _move(client, w, mid)
    assert got["status"] == "cancelled" and "owner changed from alpha to beta" in got["error"], got
    refused = client.post(f"/api/v1/offers/{mid}/accept", headers=w.headers("lessee-beta"))
    assert refused.status_code == 409 and "not an open offer" in refused.json()["error"]["message"]
    assert client.get("/api/v1/nodes/gpu-0005", headers=admin).json()["state"] == "available"
    ev = _events(client, w, "offer.withdraw")
    assert [(e["target"], e["tenant"], e["outcome"]) for e in ev] == [(str(mid), "beta", "ok")]
    assert "owner changed from alpha to beta" in ev[0]["message"]
    # the receiving tenant's feed says so
    feed = client.get("/api/v1/events?limit=5", headers=w.headers("lessee-beta")).json()["items"]
    assert any(e["action"] == "offer.withdraw" and e["target"] == str(mid) for e in feed)


def test_an_owner_cleared_withdraws_its_offers_too(world: tuple[World, TestClient]) -> None:
    w, client = world
    mid = client.post("/api/v1/leases", json={"tenant": "beta", "node": "gpu-0005"},
                      headers=w.headers("owner-alpha")).json()["id"]  # fmt: skip
    assert client.put("/api/v1/nodes/gpu-0005/owner", json={"owner": None}, headers=w.headers("admin")).status_code == 200
    assert _move(client, w, mid)["status"] == "cancelled"
    assert client.post(f"/api/v1/offers/{mid}/accept", headers=w.headers("admin")).status_code == 409


def test_a_tenant_that_owns_nodes_is_not_deleted(world: tuple[World, TestClient]) -> None:
    w, client = world
    admin = w.headers("admin")
    assert client.post("/api/v1/tenants", json={"name": "gamma"}, headers=admin).status_code == 201
    assert client.put("/api/v1/nodes/gpu-0004/owner", json={"owner": "gamma"}, headers=admin).status_code == 200
    r = client.delete("/api/v1/tenants/gamma", headers=admin)
    assert r.status_code == 409, r.text
    assert "owns node(s) gpu-0004" in r.json()["error"]["message"]
    assert client.get("/api/v1/nodes/gpu-0004", headers=admin).json()["owner"] == "gamma"
    assert client.get("/api/v1/tenants/gamma", headers=admin).status_code == 200
    # once its node has another owner, it goes
    assert client.put("/api/v1/nodes/gpu-0004/owner", json={"owner": None}, headers=admin).status_code == 200
    assert client.delete("/api/v1/tenants/gamma", headers=admin).status_code == 200


def test_a_recreated_tenant_inherits_no_offer(world: tuple[World, TestClient]) -> None:
    w, client = world
    admin = w.headers("admin")
    assert client.post("/api/v1/tenants", json={"name": "gamma"}, headers=admin).status_code == 201
    offer = client.post("/api/v1/leases", json={"tenant": "gamma", "node": "gpu-0005"}, headers=w.headers("owner-alpha"))
    assert offer.status_code == 202 and offer.json()["status"] == "offered", offer.text
    mid = offer.json()["id"]
    assert client.delete("/api/v1/tenants/gamma", headers=admin).status_code == 200
    got = _move(client, w, mid)
    assert got["status"] == "cancelled" and "tenant gamma deleted" in got["error"], got
    ev = _events(client, w, "offer.withdraw")
    assert [(e["target"], e["tenant"]) for e in ev] == [(str(mid), None)]  # not in a feed a new gamma reads
    # a new tenant of the same name: no offer waits for it, and it cannot accept the old one
    assert client.post("/api/v1/tenants", json={"name": "gamma"}, headers=admin).status_code == 201
    token = client.post("/api/v1/tokens", json={"name": "gamma-user", "role": "lessee", "tenant": "gamma"}, headers=admin)
    assert token.status_code == 201, token.text
    gamma = {"Authorization": f"Bearer {token.json()['secret']}"}
    assert client.get("/api/v1/offers", headers=gamma).json()["items"] == []
    assert client.post(f"/api/v1/offers/{mid}/accept", headers=gamma).status_code == 409
    assert client.get("/api/v1/nodes/gpu-0005", headers=admin).json()["state"] == "available"
    # nor the old tenant's history: its moves and its feed are not the new one's
    assert client.get("/api/v1/moves", headers=gamma).json()["items"] == []
    assert client.get(f"/api/v1/moves/{mid}", headers=gamma).status_code == 404
    feed = client.get("/api/v1/events?limit=100", headers=gamma).json()["items"]
    assert [e["action"] for e in feed] == ["offer.accept", "token.create", "tenant.create"], feed  # its own only
