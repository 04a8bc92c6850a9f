"""Dell OS9 (FTOS): member lists, the readings the parser gives the VLAN-centric config, port
names, and the CLI rules the SSH double enforces (so the contract suite's os9 runs mean something)."""

from __future__ import annotations

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import VlanId, check_port_name
from gpufabric.fabrics.ethernet.drivers.ssh.dialects import cli_port, load_dialect, render_batch
from gpufabric.fabrics.ethernet.readers.os9 import expand_members, parse_os9, parse_os9_bonds
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState

from support.ssh_double.os9 import Os9Double

OPTS = {"default_vlan": 1}


@pytest.mark.parametrize(
    ("words", "ports"),
    [
        (["TenGigabitEthernet", "0/14,19-20,23"], ["0/14", "0/19", "0/20", "0/23"]),
        (["twentyFiveGigE", "1/5-1/8"], ["1/5", "1/6", "1/7", "1/8"]),
        (["TenGigabitEthernet", "1/1/1-2"], ["1/1/1", "1/1/2"]),
    ],
    ids=["ranges-after-a-prefix", "full-form-range", "stacked-unit"],
)
def test_member_lists_expand_as_os9_writes_them(words: list[str], ports: list[str]) -> None:
    assert expand_members(words) == [words[0] + p for p in ports]
    assert expand_members(["Port-channel", "1-2,5"]) == ["Port-channel1", "Port-channel2", "Port-channel5"]


CONFIG = """\
default vlan-id 10
!
interface TenGigabitEthernet 0/1
 no ip address
 portmode hybrid
 switchport
 no shutdown
!
interface TenGigabitEthernet 0/2
 no ip address
 switchport
 no shutdown
!
interface TenGigabitEthernet 0/3
 no ip address
 no shutdown
!
interface TenGigabitEthernet 0/4
 no ip address
 no shutdown
!
interface TenGigabitEthernet 0/5
 no ip address
 shutdown
!
interface Port-channel 7
 no ip address
 channel-member TenGigabitEthernet 0/4-5
 switchport
 vlt-peer-lag port-channel 7
 no shutdown
!
interface Vlan 20
 tagged TenGigabitEthernet 0/1-2
 untagged Port-channel 7
!
"""


def test_default_vlan_hybrid_static_members_and_vlt() -> None:
    ports = {p.port: p for p in parse_os9(CONFIG, "sw", OPTS)}
    q = VlanId
    # hybrid, tagged only, no "!untagged" list: untagged frames land in the default VLAN (10)
    assert ports["TenGigabitEthernet0/1"] == EthernetPortConfig(
        "sw", "TenGigabitEthernet0/1", PortMode.TRUNK, q(10), (q(20),)
    )
    # not hybrid, tagged only: no native VLAN
    assert ports["TenGigabitEthernet0/2"] == EthernetPortConfig(
        "sw", "TenGigabitEthernet0/2", PortMode.TRUNK, None, (q(20),)
    )
    assert "TenGigabitEthernet0/3" not in ports  # routed (no "switchport")
    # static members of Port-channel 7 carry its VLAN; a shut member stays shut
    assert ports["TenGigabitEthernet0/4"].mode is PortMode.ACCESS and ports["TenGigabitEthernet0/4"].vlan == q(20)
    assert ports["TenGigabitEthernet0/5"].mode is PortMode.SHUTDOWN
    bonds = {b.port: b for b in parse_os9_bonds(CONFIG)}
    assert (bonds["TenGigabitEthernet0/4"].bond, bonds["TenGigabitEthernet0/4"].lacp_mode) == ("Port-channel7", "on")
    assert bonds["TenGigabitEthernet0/4"].peer_group == "vlt 7"


def test_port_names_drop_the_clis_space_and_render_it_back() -> None:
    d = load_dialect("os9")
    for name in ("TenGigabitEthernet0/12", "fortyGigE1/49", "twentyFiveGigE1/1/3", "Port-channel10"):
        assert check_port_name("switch_port", name, d.port_naming) == name
    assert cli_port(d, "TenGigabitEthernet0/12") == "TenGigabitEthernet 0/12"
    assert cli_port(d, "Port-channel10") == "Port-channel 10"
    assert cli_port(load_dialect("nxos"), "Ethernet1/1") == "Ethernet1/1"
    with pytest.raises(ValidationError, match="os9 interface name"):
        check_port_name("switch_port", "ethernet1/1/1", d.port_naming)


def _double() -> Os9Double:
    return Os9Double("", ("TenGigabitEthernet0/7", "TenGigabitEthernet0/8"), 999)


def test_the_double_refuses_what_os9_refuses() -> None:
    sw = _double()
    out = sw.shell(["configure terminal", "interface vlan 100", "untagged TenGigabitEthernet 0/7", "end"]).out
    assert out == "% Error: Port is untagged in another Vlan.\n"  # still untagged in quarantine 999
    out = sw.shell(["configure terminal", "interface vlan 100", "tagged TenGigabitEthernet 0/8", "end"]).out
    assert "Hybrid" in out  # untagged in 999 and tagged in 100 needs portmode hybrid
    out = sw.shell(["configure terminal", "interface TenGigabitEthernet 0/7", "portmode hybrid", "end"]).out
    assert "Layer-2 mode" in out
    out = sw.shell(["configure terminal", "interface TenGigabitEthernet 0/7", "no switchport", "end"]).out
    assert "non-default VLAN" in out


def test_a_trunk_with_native_is_rendered_so_os9_accepts_it_line_by_line() -> None:
    """The rendered batch runs on the double without one error, and reads back as asked."""
    d, sw = load_dialect("os9"), _double()
    q = VlanId(999)
    current = SwitchState("sw", tuple(EthernetPortConfig("sw", p, PortMode.SHUTDOWN) for p in sw.blocks))
    want = EthernetPortConfig("sw", "TenGigabitEthernet0/7", PortMode.TRUNK, VlanId(210), (VlanId(211), VlanId(212)))
    lines = render_batch(d, [want], quarantine=q, current=current)
    assert sw.shell(lines).out == "Copy completed successfully.\n"
    got = {p.port: p for p in parse_os9(sw.show(), "sw", OPTS)}
    assert got["TenGigabitEthernet0/7"] == want
    assert "portmode hybrid" in sw.blocks["TenGigabitEthernet0/7"]
