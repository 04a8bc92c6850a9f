"""The failure classes of issue 21 on small inputs written here in the shapes the real outputs
have (tests/unit/test_real_outputs.py holds the parsers to the real outputs themselves, which
are not committed: these keep guarding where those files are absent). Names and GUIDs are
made up."""

from __future__ import annotations

from gpufabric.domain.values import VlanId
from gpufabric.fabrics.dpu.readers.offload import parse_dump_flows
from gpufabric.fabrics.ethernet.drivers.ssh.dialects import load_dialect
from gpufabric.fabrics.ethernet.readers.running_config import parse_ios_bonds, parse_running_config
from gpufabric.fabrics.ethernet.state import PortMode
from gpufabric.fabrics.infiniband.inventory.match import Reason, match_fabric
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import parse_ibnetdiscover

FABRIC = """\
vendid=0x2c9
devid=0xd2f0
switchguid=0x1111(1111)
Switch\t41 "S-0000000000001111"\t\t# "MF0;leaf-01:MQM8700/U1" enhanced port 0 lid 1 lmc 0
[1]\t"H-0000000000002221"[1](2221) \t\t# "Node-07 HCA-1" lid 2 4xHDR
[2]\t"H-0000000000002222"[1](2222) \t\t# "node-08 mlx5_3 " lid 3 4xHDR
[3]\t"H-0000000000002223"[1](2223) \t\t# "MT4123 ConnectX6   Mellanox Technologies" lid 4 4xHDR
[41]\t"H-0000000000002224"[1](2224) \t\t# "Mellanox Technologies Aggregation Node" lid 5 4xHDR

caguid=0x2221
Ca\t1 "H-0000000000002221"\t\t# "Node-07 HCA-1"
[1](2221) \t"S-0000000000001111"[1]\t\t# lid 2 lmc 0 "MF0;leaf-01:MQM8700/U1" lid 1 4xHDR

caguid=0x2222
Ca\t1 "H-0000000000002222"\t\t# "node-08 mlx5_3 "
[1](2222) \t"S-0000000000001111"[2]\t\t# lid 3 lmc 0 "MF0;leaf-01:MQM8700/U1" lid 1 4xHDR

caguid=0x2223
Ca\t1 "H-0000000000002223"\t\t# "MT4123 ConnectX6   Mellanox Technologies"
[1](2223) \t"S-0000000000001111"[3]\t\t# lid 4 lmc 0 "MF0;leaf-01:MQM8700/U1" lid 1 4xHDR

caguid=0x2224
Ca\t1 "H-0000000000002224"\t\t# "Mellanox Technologies Aggregation Node"
[1](2224) \t"S-0000000000001111"[41]\t\t# lid 5 lmc 0 "MF0;leaf-01:MQM8700/U1" lid 1 4xHDR
"""


def test_fabric_of_mixed_descriptions_matches_hosts_and_skips_the_rest() -> None:
    m = match_fabric(parse_ibnetdiscover(FABRIC))
    assert [(p.node, p.device, p.switch_port) for p in m.ports] == [("node-07", "HCA-1", 1), ("node-08", "mlx5_3", 2)]
    assert m.counts() == {"matched": 2, Reason.FIRMWARE: 1, Reason.SHARP: 1, Reason.SWITCH: 1}


def test_tabs_lost_in_a_saved_capture() -> None:
    text = FABRIC.replace("\t", "").replace("\n", "\r\n")
    assert len(match_fabric(parse_ibnetdiscover(text)).ports) == 2


NXOS = """\
interface port-channel7
  switchport mode trunk
  switchport trunk allowed vlan 30-31

interface Ethernet1/1
  no switchport
  ip address 192.0.2.1/31

interface Ethernet1/2
  switchport access vlan 30

interface Ethernet1/3

interface Ethernet1/4
  channel-group 7 mode active
"""


def test_nxos_defaults_revealed_by_the_config_and_bond_members() -> None:
    st = parse_running_config(load_dialect("nxos"), NXOS, switch="sw")
    by = {p.port: p for p in st.ports}
    assert set(by) == {"port-channel7", "Ethernet1/2", "Ethernet1/3", "Ethernet1/4"}
    assert by["Ethernet1/2"].vlan == VlanId(30) and by["Ethernet1/3"].vlan == VlanId(1)
    assert by["Ethernet1/4"].mode is PortMode.TRUNK and by["Ethernet1/4"].vlans() == {30, 31}
    assert [(b.port, b.bond, b.lacp_mode) for b in parse_ios_bonds(NXOS)] == [
        ("Ethernet1/4", "port-channel7", "active")
    ]


def test_nxos_blank_port_not_read_when_the_default_is_unknown() -> None:
    text = "interface Ethernet1/3\n\ninterface Ethernet1/2\n  switchport access vlan 30\n"
    st = parse_running_config(load_dialect("nxos"), text, switch="sw")
    assert [p.port for p in st.ports] == ["Ethernet1/2"]


def test_output_ports_starting_with_a_digit() -> None:
    line = (
        "ufid:1-2-3-4-5, recirc_id(0),in_port(0a1b2c3d4e5f_h),eth_type(0x0800), packets:3, bytes:180, "
        "used:0.1s, offloaded:yes, dp:tc, actions:9f8e7d6c5b4a_h"
    )
    assert parse_dump_flows(line)[0].out_ports == ("9f8e7d6c5b4a_h",)


def test_two_cas_with_one_description_are_both_skipped_not_guessed() -> None:
    text = FABRIC.replace('"node-08 mlx5_3 "', '"NODE-07 HCA-1"')  # same host and device, other case
    m = match_fabric(parse_ibnetdiscover(text))
    assert m.ports == ()
    dups = [c for c in m.cas if c.skip == Reason.DUPLICATE]
    assert len(dups) == 2 and all("2 CAs share it" in c.reason for c in dups)
