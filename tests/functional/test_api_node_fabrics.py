"""``GET /api/v1/nodes[/N]`` carries a ``fabrics`` object (each kind's cell and node_view) next to
every field it had, and the OpenAPI schema describes it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from gpufabric.api.app import create_app

from support.api_world import World, build_world

OLD_FIELDS = {"name", "offering", "state", "owner", "tenant", "lease", "ports"}
MOVED = {"gpus": "nvlink", "dpus": "dpu"}  # issue 19: each kind's own column, under fabrics.<kind> only


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    w = build_world(tmp_path_factory.mktemp("fabrics"), nodes=3, leased=1)
    yield w
    w.store.close()


@pytest.fixture
def client(world: World) -> Iterator[TestClient]:
    with TestClient(create_app(world.ctx)) as c:
        yield c


def test_a_node_has_every_fabric_with_its_cell_and_view(world: World, client: TestClient) -> None:
    n = client.get("/api/v1/nodes/gpu-0000", headers=world.headers("admin")).json()
    assert set(n) > OLD_FIELDS  # every field it had is still there but the kinds' own columns
    assert not set(n) & set(MOVED) and all(field in n["fabrics"][kind] for field, kind in MOVED.items())
    f = n["fabrics"]
    assert list(f) == ["ethernet", "infiniband", "dpu", "nvlink"]
    assert f["ethernet"]["summary"] == "leaf-0-0/Ethernet1\nleaf-1-0/Ethernet1"
    assert [p["switch_port"] for p in f["ethernet"]["ports"]] == [p["switch_port"] for p in n["ports"]["ethernet"]]
    assert [p["port_guid"] for p in f["infiniband"]["ports"]] == [p["port_guid"] for p in n["ports"]["infiniband"]]
    assert f["infiniband"]["summary"].splitlines()[0] == "mlx5_0/1 0x0002c90300000000"
    assert f["nvlink"] == {**f["nvlink"], "summary": "8/8 GPUs", "partition_gpus": 8}  # leased to alpha, all GPUs
    assert f["dpu"] == {"summary": "", "dpus": []}
    free = client.get("/api/v1/nodes/gpu-0001", headers=world.headers("admin")).json()["fabrics"]
    assert free["nvlink"]["summary"] == "0/8 GPUs" and free["nvlink"]["partition_gpus"] == 0
    page = client.get("/api/v1/nodes", headers=world.headers("admin")).json()["items"]
    assert [p["fabrics"]["nvlink"]["summary"] for p in page] == ["8/8 GPUs", "0/8 GPUs", "0/8 GPUs"]


def test_a_lessee_sees_the_fabrics_of_its_node_only(world: World, client: TestClient) -> None:
    page = client.get("/api/v1/nodes", headers=world.headers("lessee-alpha")).json()["items"]
    assert [(p["name"], p["fabrics"]["nvlink"]["partition_gpus"]) for p in page] == [("gpu-0000", 8)]


def test_the_openapi_schema_describes_the_fabrics_object(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    fabrics = schemas["NodeOut"]["properties"]["fabrics"]
    assert fabrics["additionalProperties"]["$ref"].endswith("/FabricViewOut")
    view = schemas["FabricViewOut"]
    assert view["properties"]["summary"]["type"] == "string" and "partition_gpus" in view["properties"]["summary"]["description"]
    assert view.get("additionalProperties") is True
