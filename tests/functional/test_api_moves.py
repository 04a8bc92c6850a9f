"""API v1 of move requests checked when made (issue 18, finding 3, as reproduced through the API)
and ``POST /api/v1/moves/{id}/cancel``: who may, what it answers, what it records."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from gpufabric.store.moves import MoveLedger

from support.api_world import World

ROLES = ("admin", "owner-alpha", "lessee-alpha", "lessee-beta")


def _moves(client: TestClient, w: World) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = client.get("/api/v1/moves", headers=w.headers("admin")).json()["items"]
    return items


@pytest.mark.parametrize(
    ("who", "path", "body", "field", "allowed"),
    [
        ("owner-alpha", "/api/v1/leases", {"tenant": "alpha", "node": "gpu-0005", "networks": ["nope"]},
         "networks", "networks of tenant alpha: alpha-net, shared-name"),
        ("admin", "/api/v1/moves", {"node": "gpu-0003", "to_tenant": "beta", "networks": ["alpha-net"]},
         "networks", "networks of tenant beta: beta-net, shared-name"),
        ("admin", "/api/v1/moves/batch", {"nodes": ["gpu-0003", "gpu-0004"], "to_tenant": "beta", "offering": "nope"},
         "offering", None),
        ("admin", "/api/v1/moves", {"node": "gpu-0003", "to_tenant": "beta", "gpus": 12},
         "gpus", "1-8 (the GPUs of node gpu-0003), or unset for all"),
    ],
)
def test_a_request_the_swap_could_not_honour_is_refused_and_records_nothing(
    world: tuple[World, TestClient], who: str, path: str, body: dict[str, Any], field: str, allowed: str | None
) -> None:
    w, client = world
    r = client.post(path, json=body, headers=w.headers(who))
    assert r.status_code == 422, r.text  # was 202, then failed at the swap with every move of its batch
    err = r.json()["error"]
    assert err["field"] == field and err["message"].startswith(f"invalid {field}: ")
    assert allowed is None or err["allowed"] == allowed
    assert "baremetal" in err["allowed"] if field == "offering" else True
    assert _moves(client, w) == []
    nodes = {n["name"]: n["state"] for n in client.get("/api/v1/nodes", headers=w.headers("admin")).json()["items"]}
    assert nodes["gpu-0003"] == nodes["gpu-0005"] == "available"


def test_cancel_authorization_and_answers(world: tuple[World, TestClient]) -> None:
    w, client = world
    pending = client.post("/api/v1/moves", json={"node": "gpu-0001", "to_tenant": "alpha"}, headers=w.headers("admin"))
    assert pending.status_code == 202
    mid = pending.json()["id"]
    for who, code in zip(ROLES, (None, 403, 403, 403), strict=True):
        if code is not None:
            r = client.post(f"/api/v1/moves/{mid}/cancel", headers=w.headers(who))
            assert r.status_code == code and r.json()["error"]["code"] == "forbidden", r.text
    assert client.post(f"/api/v1/moves/{mid}/cancel").status_code == 401
    assert client.post("/api/v1/moves/999/cancel", headers=w.headers("admin")).status_code == 404
    assert client.post("/api/v1/moves/0/cancel", headers=w.headers("admin")).status_code == 422
    r = client.post(f"/api/v1/moves/{mid}/cancel", headers=w.headers("admin"))
    assert r.status_code == 200, r.text
    assert (r.json()["id"], r.json()["status"], r.json()["node"]) == (mid, "cancelled", "gpu-0001")
    node = client.get("/api/v1/nodes/gpu-0001", headers=w.headers("admin")).json()
    assert node["state"] == "leased"  # never started: it stays with beta
    detail = client.get(f"/api/v1/moves/{mid}", headers=w.headers("admin")).json()
    assert detail["events"][-1]["phase"] == "cancel" and "stays in beta" in detail["events"][-1]["message"]
    events = client.get("/api/v1/events", headers=w.headers("admin")).json()["items"]
    assert (events[0]["action"], events[0]["outcome"], events[0]["target"]) == ("move.cancel", "ok", str(mid))
    again = client.post(f"/api/v1/moves/{mid}/cancel", headers=w.headers("admin"))
    assert again.status_code == 409 and again.json()["error"]["value"] == "cancelled"


def test_a_running_move_is_not_cancelled_409_names_its_status(world: tuple[World, TestClient]) -> None:
    w, client = world
    mid = client.post("/api/v1/moves", json={"node": "gpu-0003", "to_tenant": "beta"}, headers=w.headers("admin")).json()[
        "id"
    ]
    MoveLedger(w.store).claim("elsewhere:1", 1)  # a worker runs it
    r = client.post(f"/api/v1/moves/{mid}/cancel", headers=w.headers("admin"))
    assert r.status_code == 409
    err = r.json()["error"]
    assert (err["field"], err["value"], err["allowed"]) == ("status", "running", "pending, failed")
    assert err["message"].startswith(f"move {mid} is running (at quarantine)")
    assert client.get(f"/api/v1/moves/{mid}", headers=w.headers("admin")).json()["status"] == "running"


def test_the_cancel_endpoint_is_in_the_openapi_schema(world: tuple[World, TestClient]) -> None:
    _, client = world
    op = client.get("/openapi.json").json()["paths"]["/api/v1/moves/{move_id}/cancel"]["post"]
    assert op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/MoveOut")
    assert {"401", "403", "404", "409", "422"} <= set(op["responses"])
