"""Hostile input through the HTTP API v1: huge ids and timezone-less times are client errors
(404/422 naming the field), never 500s; nothing is written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from gpufabric.api.app import create_app

from support.api_world import World, build_world


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[World, TestClient]]:
    w = build_world(tmp_path, nodes=3, leased=0)
    with TestClient(create_app(w.ctx)) as c:
        yield w, c
    w.store.close()


@pytest.mark.parametrize("lease_id", ["99999999999999999999", "9223372036854775808"], ids=["20-digits", "int64-max+1"])
def test_huge_lease_id_is_a_client_error(world: tuple[World, TestClient], lease_id: str) -> None:
    w, client = world
    r = client.delete(f"/api/v1/leases/{lease_id}", headers=w.headers("admin"))
    assert r.status_code in (404, 422), r.text
    assert "lease_id" in r.text


def test_end_without_timezone_is_422_naming_the_field(world: tuple[World, TestClient]) -> None:
    w, client = world
    body = {"tenant": "alpha", "node": "gpu-0000", "end": "2030-01-01T00:00:00"}
    r = client.post("/api/v1/leases", json=body, headers=w.headers("admin"))
    assert r.status_code == 422, r.text
    assert "end" in r.text
    assert client.get("/api/v1/leases", headers=w.headers("admin")).json()["items"] == []
    assert client.get("/api/v1/moves", headers=w.headers("admin")).json()["items"] == []
