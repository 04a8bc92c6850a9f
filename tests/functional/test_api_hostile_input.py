"""Hostile input through the HTTP API: huge ids and timezone-less times are client errors
(404/422 naming the field), never 500s; nothing is written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from gpufabric.api.app import create_app
from gpufabric.domain.segments import SegmentConfig
from gpufabric.service.store import Store


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    store = Store.open(url=f"sqlite:///{tmp_path / 'gf.db'}")
    with TestClient(create_app(lambda: store, SegmentConfig.default)) as c:
        yield c
    store.close()


@pytest.mark.parametrize("lease_id", ["99999999999999999999", "9223372036854775808"], ids=["20-digits", "int64-max+1"])
def test_huge_lease_id_is_a_client_error(client: TestClient, lease_id: str) -> None:
    r = client.delete(f"/leases/{lease_id}")
    assert r.status_code in (404, 422), r.text
    assert "lease_id" in r.text


def test_end_without_timezone_is_422_naming_the_field(client: TestClient) -> None:
    body = {"tenant": "t1", "node": "n1", "end": "2030-01-01T00:00:00"}
    r = client.post("/leases", json=body)
    assert r.status_code == 422, r.text
    assert "end" in r.text
    assert client.get("/leases").json() == []
