"""parse_ibnetdiscover / ib_ports_from_topology on outputs recorded from ibsim (+ OpenSM).

Fixtures: tests/fixtures/ibnetdiscover/*.txt, re-recorded by record.py in that directory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.inventory.match import ib_ports_from_topology, match_ca_ports
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import NodeKind, OutputFormat, parse_ibnetdiscover

FIX = Path(__file__).parents[3] / "fixtures" / "ibnetdiscover"


def load(name: str) -> str:
    return (FIX / name).read_text()


def G(v: int) -> Guid:
    return Guid(v)


# fixture, switches, CAs, links, one CA port: (description, port, port guid, lid, switch guid, switch port)
CASES = [
    ("net-nosm", 2, 2, 4, ("Hca2", 2, 0x100005, 0, 0x200000, 2)),
    ("net-1-nosm", 1, 2, 2, ("Hca2", 1, 0x100004, 0, 0x200000, 4)),
    ("net-2sw2path-nosm", 2, 2, 4, ("Hca2", 1, 0x100004, 0, 0x200001, 1)),
    ("net-2sw2path4hca-nosm", 2, 4, 6, ("Hca4", 1, 0x10000A, 0, 0x200001, 2)),
    ("net-2sw2path4hca2port-nosm", 2, 2, 6, ("Hca1", 2, 0x100002, 0, 0x200000, 2)),
    ("net-2sw2path4hca2port-sm", 2, 2, 6, ("Hca2", 2, 0x100005, 6, 0x200001, 2)),
    ("lab-6x2-sm", 4, 13, 17, ("gpu-a05 mlx5_1", 1, 0x0002C90310000511, 16, 0x0002C90330000002, 2)),
]
FORMATS = [("topology", OutputFormat.TOPOLOGY), ("ports", OutputFormat.PORTS)]


@pytest.mark.parametrize("fmt_suffix,fmt", FORMATS, ids=[f[0] for f in FORMATS])
@pytest.mark.parametrize("name,n_sw,n_ca,n_links,ca_port", CASES, ids=[c[0] for c in CASES])
def test_counts_format_and_one_ca_port(
    name: str,
    n_sw: int,
    n_ca: int,
    n_links: int,
    ca_port: tuple[str, int, int, int, int, int],
    fmt_suffix: str,
    fmt: OutputFormat,
) -> None:
    topo = parse_ibnetdiscover(load(f"{name}.{fmt_suffix}.txt"))
    assert topo.format is fmt
    assert len(topo.switches()) == n_sw
    assert len(topo.cas()) == n_ca
    assert len(topo.links) == n_links
    desc, port, pguid, lid, sw_guid, sw_port = ca_port
    ca = next(n for n in topo.cas() if n.description == desc)
    p = ca.port(port)
    assert p is not None
    assert p.port_guid == G(pguid)
    assert p.lid == lid
    # the link from that CA port ends on the expected switch port (switch guid = its port guid)
    key = ca.node_guid if fmt is OutputFormat.TOPOLOGY else G(pguid)
    assert key is not None
    peer = topo.peer(key, port)
    assert peer is not None and peer.kind is NodeKind.SWITCH
    assert peer.port == sw_port
    assert peer.port_guid == G(sw_guid)


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_both_formats_agree_on_port_guids_and_links(name: str) -> None:
    default = parse_ibnetdiscover(load(f"{name}.topology.txt"))
    ports = parse_ibnetdiscover(load(f"{name}.ports.txt"))

    def ca_ports(t: object) -> set[tuple[str, int, Guid | None, int | None]]:
        assert hasattr(t, "cas")
        return {(n.description, p.port_num, p.port_guid, p.lid) for n in t.cas() for p in n.ports}

    def links(t: object) -> set[frozenset[tuple[Guid | None, int]]]:
        assert hasattr(t, "links")
        return {frozenset(((lk.a.port_guid, lk.a.port), (lk.b.port_guid, lk.b.port))) for lk in t.links}

    # the -p report also lists unconnected ports; compare connected ones
    linked = {(e.port_guid, e.port) for lk in ports.links for e in (lk.a, lk.b)}
    assert ca_ports(default) == {c for c in ca_ports(ports) if (c[2], c[1]) in linked}
    assert links(default) == links(ports)


def test_default_format_node_details_lab() -> None:
    topo = parse_ibnetdiscover(load("lab-6x2-sm.topology.txt"))
    leaf1 = topo.node(G(0x0002C90330000001))
    assert leaf1 is not None
    assert (leaf1.kind, leaf1.description, leaf1.num_ports, leaf1.lid) == (NodeKind.SWITCH, "leaf-01", 36, 3)
    assert leaf1.sysimg_guid == G(0x0002C90330000001)
    assert [p.port_num for p in leaf1.ports] == [1, 2, 3, 4, 5, 6, 7, 8, 18, 19, 20]
    sm = topo.node(G(0x0002C90310000000))
    assert sm is not None
    assert (sm.kind, sm.description, sm.num_ports, sm.lids) == (NodeKind.CA, "sm-01 mlx5_0", 1, (1,))
    assert sm.ports[0].port_guid == G(0x0002C90310000001)
    assert (sm.ports[0].width, sm.ports[0].speed, sm.ports[0].lmc) == ("4x", "SDR", 0)
    spine2 = topo.node(G(0x0002C90320000002))
    assert spine2 is not None and spine2.lid == 10
    assert topo.peer(G(0x0002C90320000002), 2) == topo.peer(G(0x0002C90320000002), 2)
    up = topo.peer(G(0x0002C90330000002), 20)
    assert up is not None and (up.description, up.port, up.node_guid) == ("spine-02", 2, G(0x0002C90320000002))


def test_ports_format_has_no_ca_node_guid_but_groups_dual_port_hca() -> None:
    topo = parse_ibnetdiscover(load("net-2sw2path4hca2port-sm.ports.txt"))
    hca1 = next(n for n in topo.cas() if n.description == "Hca1")
    assert hca1.node_guid is None and hca1.num_ports is None
    assert [(p.port_num, p.port_guid, p.lid) for p in hca1.ports] == [(1, G(0x100001), 1), (2, G(0x100002), 4)]
    sw1 = next(n for n in topo.switches() if n.description == "Switch1")
    assert (sw1.port_guid, sw1.lid, len(sw1.ports)) == (G(0x200000), 2, 8)


def test_ib_ports_from_lab_topology() -> None:
    ports = ib_ports_from_topology(parse_ibnetdiscover(load("lab-6x2-sm.topology.txt")))
    assert len(ports) == 13
    by = {(p.node, p.device): p for p in ports}
    assert sorted({p.node for p in ports}) == [f"gpu-a0{i}" for i in range(1, 7)] + ["sm-01"]
    p = by[("gpu-a03", "mlx5_1")]
    assert (p.port_num, p.port_guid, p.node_guid) == (1, G(0x0002C90310000311), G(0x0002C90310000310))
    assert (p.switch_guid, p.switch_port) == (G(0x0002C90330000001), 6)
    p = by[("gpu-a06", "mlx5_0")]
    assert (p.switch_guid, p.switch_port) == (G(0x0002C90330000002), 3)


def test_description_not_host_device_is_an_error() -> None:
    topo = parse_ibnetdiscover(load("net-nosm.topology.txt"))
    with pytest.raises(ValidationError) as e:
        ib_ports_from_topology(topo)
    assert e.value.field == "ib_node_description"
    assert e.value.value in ("Hca1", "Hca2")
    ports, skipped = match_ca_ports(topo)
    assert ports == ()
    assert sorted(s.description for s in skipped) == ["Hca1", "Hca2"]


def test_ports_report_cannot_give_inventory() -> None:
    with pytest.raises(ValidationError, match="no CA node GUIDs"):
        ib_ports_from_topology(parse_ibnetdiscover(load("lab-6x2-sm.ports.txt")))


DUP = """\
vendid=0x2c9
devid=0x1017
sysimgguid=0x1
caguid=0x1
Ca\t1 "H-0000000000000001"\t\t# "gpu-a01 mlx5_0"
[1](2) \t"S-00000000000000aa"[1]\t\t# lid 4 lmc 0 "sw" lid 3 4xHDR

vendid=0x2c9
devid=0x1017
sysimgguid=0x10
caguid=0x10
Ca\t1 "H-0000000000000010"\t\t# "gpu-a01 mlx5_0"
[1](11) \t"S-00000000000000aa"[2]\t\t# lid 5 lmc 0 "sw" lid 3 4xHDR
"""


def test_duplicate_description_is_an_error() -> None:
    with pytest.raises(ValidationError, match="share it"):
        ib_ports_from_topology(parse_ibnetdiscover(DUP))


def test_real_hardware_style_lines_parse() -> None:
    """Speeds with extended rates, enhanced port 0, vendor ids and an upper-case host (host names
    are case-insensitive: read in lower case, as real fabrics print them, see test_real_outputs)."""
    text = (
        "vendid=0x2c9\ndevid=0xd2f0\nsysimgguid=0xb8cef60300aabb00\n"
        "switchguid=0xb8cef60300aabb00(b8cef60300aabb00)\n"
        'Switch\t40 "S-b8cef60300aabb00"\t\t# "MF0;ib-leaf-07:MQM8700/U1" enhanced port 0 lid 7 lmc 0\n'
        '[1]\t"H-0c42a10300112230"[1](0c42a10300112230) \t\t# "GPU-B12 mlx5_0" lid 31 4xHDR\n'
        "\nvendid=0x2c9\ndevid=0x101b\nsysimgguid=0x0c42a10300112230\ncaguid=0x0c42a10300112230\n"
        'Ca\t1 "H-0c42a10300112230"\t\t# "GPU-B12 mlx5_0"\n'
        '[1](0c42a10300112230) \t"S-b8cef60300aabb00"[1]\t\t# lid 31 lmc 0 "MF0;ib-leaf-07:MQM8700/U1" lid 7 4xHDR\n'
    )
    topo = parse_ibnetdiscover(text)
    sw = topo.switches()[0]
    assert (sw.description, sw.lid, sw.num_ports, sw.vendor_id, sw.device_id) == (
        "MF0;ib-leaf-07:MQM8700/U1",
        7,
        40,
        0x2C9,
        0xD2F0,
    )
    ca = topo.cas()[0]
    assert (ca.ports[0].port_guid, ca.ports[0].speed, ca.ports[0].lid) == (G(0x0C42A10300112230), "HDR", 31)
    ports, skipped = match_ca_ports(topo)
    assert skipped == () and [(p.node, p.device, p.switch_port) for p in ports] == [("gpu-b12", "mlx5_0", 1)]


@pytest.mark.parametrize(
    "text,match",
    [
        ("hello world\n", "no node found"),
        ("", "no node found"),
        ('Switch\t8 "S-0000000000200001"\t\t# "x" lid zero\n', "line 1: unparsable switch record"),
        ('Switch\t8 "S-01"\t\t# "x" base port 0 lid 0 lmc 0\n[1] garbage\n', "line 2: unparsable port line"),
        ("CA     0  1 0x0000000000100004 4x SDR - SW   what\n", "line 1: unparsable port report line"),
    ],
    ids=["not-ibnetdiscover", "empty", "bad-switch-header", "bad-port-line", "bad-ports-report-line"],
)
def test_malformed_input_is_rejected(text: str, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        parse_ibnetdiscover(text)


@pytest.mark.parametrize(
    ("desc", "reason"),
    [("gpu-a01\x1b[2J mlx5_0", "printable ASCII"), ("gpu-a01 " + "x" * 60 + "0", "printable ASCII"),
     ("gpu-a01;reboot mlx5_0", "host part"), ("[/x] mlx5_0", "host part")],
    ids=["escape-sequence", "longer-than-64-bytes", "shell-separator-in-host", "markup-in-host"],
)  # fmt: skip
def test_hostile_node_descriptions_are_not_matched(desc: str, reason: str) -> None:
    text = load("lab-6x2-sm.topology.txt").replace("gpu-a01 mlx5_0", desc)
    ports, skipped = match_ca_ports(parse_ibnetdiscover(text))
    assert [s.description for s in skipped] == [desc] and reason in skipped[0].reason
    assert all(p.node != "gpu-a01" or p.device != "mlx5_0" for p in ports)
