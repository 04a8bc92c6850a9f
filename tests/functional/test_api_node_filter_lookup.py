"""The node list's ``fabric`` filter and the port lookup go through the kinds (issue 19): a filter
names any fabric instance or kind (its rows and its kind's default row), an unknown one is a 422
naming the known ones; a lookup by switch port, by an aggregate or by port GUID is a key lookup
(``FabricKind.lookup_key``), answered only with what the caller may see."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from gpufabric.api.app import create_app
from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.models import Inventory, Node
from gpufabric.fabrics.ethernet.entries import EthernetPort, ethernet_ports, with_ethernet
from gpufabric.store.registry import parse_segments
from gpufabric.workflow.actions import Actions

from support.api_world import World, clone_world


def test_the_fabric_filter_takes_instances_and_kinds_and_names_the_known_ones(template: World, tmp_path: Path) -> None:
    w = clone_world(template, tmp_path)
    Actions(w.store, parse_segments).import_inventory(LOCAL_ADMIN, Inventory((Node("bare-01"),)))  # no port at all
    with TestClient(create_app(w.ctx)) as client:
        h = w.headers("admin")
        every = {n["name"] for n in client.get("/api/v1/nodes?limit=100", headers=h).json()["items"]}
        for fabric in ("ethernet", "infiniband", "nvlink"):
            got = {n["name"] for n in client.get(f"/api/v1/nodes?limit=100&fabric={fabric}", headers=h).json()["items"]}
            assert got == every - {"bare-01"}, fabric
        assert client.get("/api/v1/nodes?fabric=dpu", headers=h).json()["items"] == []  # no node has a DPU
        bad = client.get("/api/v1/nodes?fabric=nosuch", headers=h)
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "fabric"
        assert "ethernet" in bad.json()["error"]["allowed"] and "infiniband" in bad.json()["error"]["allowed"]


def test_a_port_is_found_by_its_switch_port_its_aggregate_or_its_guid(template: World, tmp_path: Path) -> None:
    w = clone_world(template, tmp_path)
    n5 = w.store.node("gpu-0005")  # owned by alpha, leased by nobody
    bonded = with_ethernet(n5, *(EthernetPort("gpu-0005", f"eth{i}", "leaf-9", f"Ethernet{i + 1}", "", "Port-Channel5", "lacp")
                                 for i in range(2)))  # fmt: skip
    Actions(w.store, parse_segments).import_inventory(LOCAL_ADMIN, Inventory((bonded,)))
    assert [p.bond for p in ethernet_ports(w.store.node("gpu-0005"))] == ["Port-Channel5", "Port-Channel5"]
    with TestClient(create_app(w.ctx)) as client:
        def lookup(who: str, query: str) -> tuple[int, str | None]:
            r = client.get(f"/api/v1/ports/lookup?{query}", headers=w.headers(who))
            return r.status_code, r.json().get("node")

        assert lookup("admin", "switch=leaf-0-0&port=Ethernet2") == (200, "gpu-0001")
        assert lookup("admin", "switch=leaf-9&port=Port-Channel5") == (200, "gpu-0005")  # an aggregate is a key too
        assert lookup("admin", "switch=leaf-9&port=Ethernet2") == (200, "gpu-0005")
        assert lookup("admin", "guid=0x0002c90300020003") == (200, "gpu-0002")
        assert lookup("admin", "switch=leaf-0-0&port=Ethernet99")[0] == 404
        assert lookup("lessee-beta", "switch=leaf-9&port=Port-Channel5")[0] == 404  # not its node: not shown
        assert client.get("/api/v1/ports/lookup?switch=leaf-9", headers=w.headers("admin")).status_code == 422
