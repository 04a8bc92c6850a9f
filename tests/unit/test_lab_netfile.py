"""Pure lab layout: the ibsim net file generator and the Ethernet plan (names, MACs, IPs)."""

from __future__ import annotations

import re

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.ethernet.segments import DEFAULT_QUARANTINE_VLAN
from gpufabric.lab.netfile import (
    SM_NODE,
    FabricSpec,
    generate_netfile,
    hca_node_guid,
    hca_port_guid,
    plan_fabric,
    render_netfile,
)
from gpufabric.lab.netns import plan_ethernet


def records(text: str) -> dict[str, tuple[str, int, Guid, list[tuple[int, str, int]]]]:
    """Parse our own net file back: node id -> (type, ports, guid, [(port, remote, remote port)])."""
    out: dict[str, tuple[str, int, Guid, list[tuple[int, str, int]]]] = {}
    guid = Guid(0)
    cur = ""
    for line in text.splitlines():
        if m := re.match(r"^(switchguid|caguid)=(0x[0-9a-f]+)$", line):
            guid = Guid.parse(m[2])
        elif m := re.match(r'^(Switch|Hca) (\d+) "(.+)"$', line):
            cur = m[3]
            out[cur] = (m[1], int(m[2]), guid, [])
        elif m := re.match(r'^\[(\d+)\] "(.+)"\[(\d+)\]$', line):
            out[cur][3].append((int(m[1]), m[2], int(m[3])))
    return out


@pytest.mark.parametrize(
    "nodes,hcas,leaves,per_leaf",
    [(6, 2, 2, 4), (1, 1, 1, 4), (9, 8, 5, 2), (40, 1, 10, 4), (3, 16, 3, 1)],
    ids=["6x2", "1x1", "9x8", "40x1", "3x16"],
)
def test_layout_sizes(nodes: int, hcas: int, leaves: int, per_leaf: int) -> None:
    spec = FabricSpec(nodes, hcas)
    layout = plan_fabric(spec)
    assert spec.nodes_per_leaf == per_leaf
    assert len(layout.leaves) == leaves
    assert len(layout.spines) == 2
    assert len(layout.hcas) == nodes * hcas + 1
    assert layout.sm.description == SM_NODE
    assert len(layout.uplinks) == leaves * 2
    recs = records(render_netfile(layout))
    assert len(recs) == nodes * hcas + 1 + leaves + 2


def test_net_file_6x2_cabling_and_guids() -> None:
    recs = records(generate_netfile(6, 2))
    kind, ports, guid, links = recs["gpu-a05 mlx5_1"]
    assert (kind, ports, guid, links) == ("Hca", 1, Guid(0x0002C90310000510), [(1, "leaf-02", 2)])
    assert recs["sm-01 mlx5_0"][2:] == (Guid(0x0002C90310000000), [(1, "leaf-01", 18)])
    kind, ports, guid, links = recs["leaf-01"]
    assert (kind, ports, guid) == ("Switch", 36, Guid(0x0002C90330000001))
    assert links[:2] == [(1, "gpu-a01 mlx5_0", 1), (2, "gpu-a01 mlx5_1", 1)]
    assert (18, "sm-01 mlx5_0", 1) in links
    assert links[-2:] == [(19, "spine-01", 1), (20, "spine-02", 1)]
    assert recs["spine-02"][2:] == (Guid(0x0002C90320000002), [(1, "leaf-01", 20), (2, "leaf-02", 20)])


def test_every_link_is_declared_from_both_ends() -> None:
    recs = records(generate_netfile(13, 3))
    for name, (_, _, _, links) in recs.items():
        for port, remote, rport in links:
            assert (rport, name, port) in recs[remote][3], (name, port, remote, rport)


def test_generation_is_deterministic() -> None:
    assert generate_netfile(6, 2) == generate_netfile(6, 2)
    assert generate_netfile(6, 2) != generate_netfile(6, 3)


@pytest.mark.parametrize(
    "node,hca,node_guid,port_guid",
    [
        (1, 0, 0x0002C90310000100, 0x0002C90310000101),
        (12, 7, 0x0002C90310000C70, 0x0002C90310000C71),
        (0, 0, 0x0002C90310000000, 0x0002C90310000001),
    ],
    ids=["gpu-a01-mlx5_0", "gpu-a12-mlx5_7", "sm-01"],
)
def test_guid_scheme(node: int, hca: int, node_guid: int, port_guid: int) -> None:
    assert hca_node_guid(node, hca) == Guid(node_guid)
    assert hca_port_guid(node, hca) == Guid(port_guid)


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"nodes": 0}, "nodes"),
        ({"nodes": 2049}, "nodes"),
        ({"hcas_per_node": 0}, "hcas_per_node"),
        ({"hcas_per_node": 17}, "hcas_per_node"),
        ({"spines": 1}, "spines"),
        ({"nodes_per_leaf": 9}, "nodes_per_leaf"),
        ({"leaf_ports": 7}, "leaf_ports"),
    ],
    ids=["no-nodes", "too-many-nodes", "no-hca", "too-many-hcas", "one-spine", "leaf-overfull", "odd-radix"],
)
def test_invalid_specs(kwargs: dict[str, int], field: str) -> None:
    with pytest.raises(ValidationError) as e:
        FabricSpec(**kwargs)
    assert e.value.field == field


def test_a_2048_node_hgx_cluster_has_16384_distinct_hcas_on_137_leaves() -> None:
    spec = FabricSpec(nodes=2048, hcas_per_node=8, leaf_ports=254, nodes_per_leaf=15)
    recs = records(generate_netfile(2048, 8, leaf_ports=254, nodes_per_leaf=15))
    hcas = [r for name, r in recs.items() if r[0] == "Hca" and name != SM_NODE]
    assert (spec.leaves, len(hcas), len({r[2] for r in hcas})) == (137, 16384, 16384)
    assert recs["gpu-a2048 mlx5_7"][2] == hca_node_guid(2048, 7) == Guid(0x0002C90310080070)


def test_ethernet_plan_names_fit_and_are_prefixed() -> None:
    nodes = [f"gpu-a{i:02d}" for i in range(1, 1001)]
    plan = plan_ethernet("gfabcde", nodes, ports_per_node=2)
    assert len(plan.ports) == 2000
    assert len(plan.leaves) == 250
    names = [plan.spine, *plan.leaves, *(p.ovs_port for p in plan.ports)]
    assert all(n.startswith("gfabcde") and len(n) <= 15 for n in names)
    assert len(set(p.ovs_port for p in plan.ports)) == 2000
    assert len(set(p.mac for p in plan.ports)) == 2000
    assert len(set(p.ip for p in plan.ports)) == 2000
    assert all(p.netns.startswith("gfabcde-") for p in plan.ports)


def test_ethernet_plan_values() -> None:
    plan = plan_ethernet("gfabcde", [f"gpu-a0{i}" for i in range(1, 7)], ports_per_node=1)
    p5 = next(p for p in plan.ports if p.node == "gpu-a05")
    assert (p5.nic, p5.netns, p5.bridge, p5.ovs_port, p5.ip) == (
        "eth0",
        "gfabcde-gpu-a05",
        "gfabcde-leaf02",
        "gfabcden005p0",
        "10.77.0.5/16",
    )
    assert re.fullmatch(r"02(:[0-9a-f]{2}){5}", p5.mac)
    assert plan.leaves == ("gfabcde-leaf01", "gfabcde-leaf02")
    assert plan.patch_ports("gfabcde-leaf02") == ("gfabcde-l02-up", "gfabcde-s-l02")
    assert plan.quarantine_vlan == DEFAULT_QUARANTINE_VLAN


def test_ethernet_plan_parks_ports_on_the_quarantine_vlan_it_is_given() -> None:
    plan = plan_ethernet("gfabcde", ["gpu-a01", "gpu-a02"], quarantine_vlan=3901)
    assert plan.quarantine_vlan == 3901


@pytest.mark.parametrize("bad", [1, 0, 4095, "x"])
def test_ethernet_plan_refuses_a_bad_quarantine_vlan(bad: object) -> None:
    with pytest.raises(ValidationError) as e:
        plan_ethernet("gfabcde", ["gpu-a01"], quarantine_vlan=bad)  # type: ignore[arg-type]
    assert e.value.field == "quarantine_vlan"


def test_ethernet_plan_rejects_long_names() -> None:
    with pytest.raises(ValidationError, match="at most 15"):
        plan_ethernet("a-very-long-prefix", ["gpu-a01"])


def test_ethernet_plan_bonds_eth0_and_eth1_of_bonded_nodes() -> None:
    nodes = [f"gpu-a0{i}" for i in range(1, 7)]
    plan = plan_ethernet("gfabcde", nodes, ports_per_node=1, bonded=("gpu-a02",))
    a02 = [p for p in plan.ports if p.node == "gpu-a02"]
    assert [(p.nic, p.ovs_port, p.bond, p.bond_mode, p.ip) for p in a02] == [
        ("eth0", "gfabcden002p0", "gfabcden002b", "lacp", "10.77.0.2/16"),  # the bond's one address
        ("eth1", "gfabcden002p1", "gfabcden002b", "lacp", ""),
    ]
    assert {p.bridge for p in a02} == {"gfabcde-leaf01"}
    assert len({p.mac for p in a02}) == 2
    others = [p for p in plan.ports if p.node != "gpu-a02"]
    assert len(others) == 5 and all(p.bond == "" and p.bond_mode == "" for p in others)
    three = plan_ethernet("gfabcde", nodes, ports_per_node=3, bonded=("gpu-a02",))
    assert [(p.nic, p.bond) for p in three.ports if p.node == "gpu-a02"] == [
        ("eth0", "gfabcden002b"), ("eth1", "gfabcden002b"), ("eth2", "")]  # fmt: skip


def test_ethernet_plan_rejects_bonded_nodes_not_in_the_lab() -> None:
    with pytest.raises(ValidationError, match=r"invalid bonded: 'gpu-x09'.*allowed: nodes of the lab \(gpu-a01..gpu-a02\)"):
        plan_ethernet("gfabcde", ["gpu-a01", "gpu-a02"], bonded=("gpu-x09",))
