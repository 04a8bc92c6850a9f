"""Each port's path up its fabric (issue 31 item 11, NVIDIA NCP NET01-01): the InfiniBand kind
reads it from ibnetdiscover (a switch's uplinks are its links to switches farther from the CAs),
the Ethernet kind from the uplinks fabrics.yaml declares per switch; the node API lists it per
port, leaf first. The lab's own topology is checked end to end in tests/e2e/test_port_paths.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.models import Node
from gpufabric.domain.topology import path_json, path_text, tiers_above
from gpufabric.domain.values import Guid
from gpufabric.fabrics.ethernet.entries import EthernetPort, with_ethernet
from gpufabric.fabrics.ethernet.inventory import declared_uplinks
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.infiniband.entries import dump_ib, parse_ib, with_ib
from gpufabric.fabrics.infiniband.inventory.match import match_ca_ports
from gpufabric.fabrics.infiniband.inventory.uplinks import leaf_paths, with_paths
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import (
    IbEndpoint,
    IbLink,
    IbTopology,
    NodeKind,
    OutputFormat,
    parse_ibnetdiscover,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ibnetdiscover"
LEAF_SPINE = [{"tier": "leaf", "switches": ["leaf-01"]}, {"tier": "spine", "switches": ["spine-01", "spine-02"]}]


def test_an_hca_port_path_is_its_leaf_then_the_spines_from_ibnetdiscover() -> None:
    topo = parse_ibnetdiscover((FIXTURES / "lab-6x2-sm.topology.txt").read_text())
    ports, _ = match_ca_ports(topo)
    got = {(p.node, p.device): p.path for p in with_paths(ports, leaf_paths(topo))}
    assert got[("gpu-a01", "mlx5_0")] == (("leaf-01",), ("spine-01", "spine-02"))
    assert got[("gpu-a05", "mlx5_1")] == (("leaf-02",), ("spine-01", "spine-02"))
    mine = (p for p in with_paths(ports, leaf_paths(topo)) if p.node == "gpu-a01")
    listed = InfinibandKind().listed_ports(with_ib(Node("gpu-a01"), *mine))
    assert [q["path"] for q in listed] == [LEAF_SPINE, LEAF_SPINE]
    ports_only = parse_ibnetdiscover((FIXTURES / "lab-6x2-sm.ports.txt").read_text())  # the -p report: the same tiers
    assert leaf_paths(ports_only) == leaf_paths(topo)


def _sw(guid: int, desc: str, port: int) -> IbEndpoint:
    return IbEndpoint(NodeKind.SWITCH, Guid(guid), port, None, desc)


def test_a_three_tier_fat_tree_gives_leaf_spine_core_and_never_walks_back_down() -> None:
    ca = IbEndpoint(NodeKind.CA, Guid(0x100), 1, Guid(0x101), "gpu-a01 mlx5_0")
    links = (
        IbLink(ca, _sw(0x1, "leaf-1", 1)), IbLink(IbEndpoint(NodeKind.CA, Guid(0x200), 1, Guid(0x201), "gpu-a02 mlx5_0"),
                                                  _sw(0x2, "leaf-2", 1)),
        IbLink(_sw(0x1, "leaf-1", 10), _sw(0x11, "spine-1", 1)), IbLink(_sw(0x2, "leaf-2", 10), _sw(0x11, "spine-1", 2)),
        IbLink(_sw(0x1, "leaf-1", 11), _sw(0x12, "spine-2", 1)),
        IbLink(_sw(0x11, "spine-1", 20), _sw(0x21, "core-1", 1)), IbLink(_sw(0x12, "spine-2", 20), _sw(0x21, "core-1", 2)),
    )  # fmt: skip
    paths = leaf_paths(IbTopology(OutputFormat.TOPOLOGY, (), links))
    assert paths[Guid(0x1)] == (("leaf-1",), ("spine-1", "spine-2"), ("core-1",))
    assert paths[Guid(0x2)] == (("leaf-2",), ("spine-1",), ("core-1",))  # not leaf-1 (a lower tier) through spine-1
    assert [t["tier"] for t in path_json(paths[Guid(0x1)])] == ["leaf", "spine", "core"]
    assert path_text(path_json(paths[Guid(0x1)])) == "leaf-1 -> spine-1|spine-2 -> core-1"


def test_two_peer_switches_each_with_cas_are_two_leaves_not_a_spine() -> None:
    topo = parse_ibnetdiscover((FIXTURES / "net-2sw2path-nosm.topology.txt").read_text())
    assert sorted(leaf_paths(topo).values()) == [(("Switch1",),), (("Switch2",),)]


def test_a_stored_path_round_trips_and_a_bad_one_names_its_field() -> None:
    raw = [{"device": "mlx5_0", "port_guid": "0x0002c90310000101", "node_guid": "0x0002c90310000100",
            "switch_guid": "0x0002c90330000001", "switch_port": 1, "path": [["leaf-01"], ["spine-01", "spine-02"]]}]  # fmt: skip
    ports = parse_ib("gpu-a01", raw, "nodes[0].ib")
    assert ports[0].path == (("leaf-01",), ("spine-01", "spine-02"))
    assert dump_ib(ports)[0]["path"] == [["leaf-01"], ["spine-01", "spine-02"]]
    for bad, field in (("leaf-01", "nodes[0].ib[0].path"), ([[]], "nodes[0].ib[0].path[0]"),
                       ([["ok", "bad\nname"]], "nodes[0].ib[0].path[0][1]")):  # fmt: skip
        with pytest.raises(ValidationError) as e:
            parse_ib("gpu-a01", [{**raw[0], "path": bad}], "nodes[0].ib")
        assert e.value.field == field


def _eth_node() -> Node:
    return with_ethernet(Node("gpu-a01"), EthernetPort("gpu-a01", "eth0", "leaf-1", "Ethernet1", "52:54:00:00:00:01"),
                         EthernetPort("gpu-a01", "eth1", "leaf-2", "Ethernet1", "52:54:00:00:00:02"))  # fmt: skip


def test_an_ethernet_port_path_follows_the_uplinks_fabrics_yaml_declares() -> None:
    section: list[Any] = [
        {"driver": "ovsdb", "options": {"switch": "leaf-1"}, "uplinks": ["spine-1", "spine-2"]},
        {"driver": "ovsdb", "options": {"switch": "leaf-2"}},  # none declared: the leaf alone
        {"driver": "ovsdb", "options": {"switch": "spine-1"}, "uplinks": ["core-1"]},
    ]
    listed = EthernetKind().bind("ethernet", section).listed_ports(_eth_node())
    assert [(q["name"], path_text(q["path"])) for q in listed] == [
        ("eth0", "leaf-1 -> spine-1|spine-2 -> core-1"), ("eth1", "leaf-2")]  # fmt: skip
    assert [path_text(q["path"]) for q in EthernetKind().listed_ports(_eth_node())] == ["leaf-1", "leaf-2"]  # unbound
    assert tiers_above("a", {"a": ["b"], "b": ["a", "c"]}) == (("a",), ("b",), ("c",))  # a loop is not walked twice


@pytest.mark.parametrize(
    ("uplinks", "field"),
    [("spine-1", "ethernet[0].uplinks"), (["spine-1", "spine-1"], "ethernet[0].uplinks"),
     (["leaf-1"], "ethernet[0].uplinks"), (["ok", ""], "ethernet[0].uplinks[1]")],
)  # fmt: skip
def test_bad_uplinks_are_refused_naming_the_field(uplinks: Any, field: str) -> None:
    with pytest.raises(ValidationError) as e:
        declared_uplinks([{"driver": "ovsdb", "options": {"switch": "leaf-1"}, "uplinks": uplinks}])
    assert e.value.field == field
    assert isinstance(e.value, ConfigError) or field.endswith("]")
