"""Bond members back into their aggregate (issue 21, item 1): the diff of a member the switch
reports outside its aggregate, the rendered membership lines per dialect (exact strings), the
membership read back by the parsers, and the audit's ETH-BOND-MEMBER-OUT on a parsed state."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import Lease, Network, Node
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.audit.bonds import OUT_ID
from gpufabric.fabrics.ethernet.drivers.ssh.dialects import load_dialect, render_batch
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.ethernet.readers.running_config import parse_running_config
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState, aggregate_key
from gpufabric.workflow.inventory import inventory_from_dict

from support.segments import segment

KIND = EthernetKind()
Q = VlanId(4000)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _nodes(bond: str = "Port-Channel10", sw: str = "leaf01", mode: str = "lacp") -> tuple[Node, ...]:
    eth: list[dict[str, Any]] = [
        {"name": f"eth{i}", "switch": sw, "switch_port": f"Ethernet{i + 1}", "bond": bond, "bond_mode": mode} for i in range(2)
    ]
    return inventory_from_dict({"version": 1, "nodes": [{"name": "gpu-b01", "ethernet": eth}]}).nodes


def _tenancy(nodes: tuple[Node, ...]) -> Tenancy:
    net = Network("n1", "acme", (segment("ethernet", 2001, vlan=VlanId(2001)),))
    return Tenancy(nodes, {"gpu-b01": Lease("acme", "gpu-b01", T0, networks=("n1",))}, {("acme", "n1"): net},
                   settings={"quarantine_vlan": Q.value})  # fmt: skip


def _member(port: str, bond: str = "", vlan: int = 2001) -> EthernetPortConfig:
    return EthernetPortConfig("leaf01", port, PortMode.ACCESS, VlanId(vlan), bond=bond)


AGG = EthernetPortConfig("leaf01", "Port-Channel10", PortMode.ACCESS, VlanId(2001))


def test_desired_aggregate_lists_its_members_and_equality_ignores_them() -> None:
    (sw,) = KIND.desired(_tenancy(_nodes()))
    (agg,) = sw.ports
    assert (agg.port, agg.members, agg.bond_mode) == ("Port-Channel10", ("Ethernet1", "Ethernet2"), "lacp")
    assert agg == AGG  # members / bond are outside equality: VLAN plans and goldens unchanged


@pytest.mark.parametrize(
    ("eth1", "eth2", "back"),
    [
        pytest.param("Port-Channel10", "Port-Channel10", [], id="both-in"),
        pytest.param("port-channel10", "Po10", [], id="in-however-spelled"),
        pytest.param("Port-Channel10", "", ["Ethernet2"], id="one-pulled-out"),
        pytest.param("Port-Channel11", "", ["Ethernet1", "Ethernet2"], id="one-in-another-one-out"),
    ],
)
def test_diff_puts_back_members_outside_their_aggregate(eth1: str, eth2: str, back: list[str]) -> None:
    desired = KIND.desired(_tenancy(_nodes()))
    other = EthernetPortConfig("leaf01", "Port-Channel11", PortMode.ACCESS, VlanId(3000))  # another channel the switch has
    observed = (SwitchState("leaf01", (_member("Ethernet1", eth1), _member("Ethernet2", eth2), AGG, other)),)
    plan = KIND.diff(desired, observed)
    assert [(c.after.port, c.after.bond, c.after.bond_mode, c.after.vlan) for c in plan.changes] == [
        (p, "Port-Channel10", "lacp", VlanId(2001)) for p in back
    ]
    before = {"Ethernet1": f"member of {eth1}" if eth1 else "access 2001", "Ethernet2": f"member of {eth2}" if eth2 else "access 2001"}
    assert [str(c) for c in plan.changes] == [f"ethernet leaf01/{p}: {before[p]} -> member of Port-Channel10" for p in back]
    removals, additions = plan.split()
    assert removals.empty and [c.after.port for c in additions.changes] == back


def test_a_member_the_switch_does_not_report_is_no_change() -> None:
    """OVS (members are interfaces of the bond's one port), Junos / SONiC / NVUE (members carry no
    config of their own): the member is not read, so the diff does not guess its membership."""
    desired = KIND.desired(_tenancy(_nodes()))
    assert KIND.diff(desired, (SwitchState("leaf01", (AGG,)),)).empty


def _back(port: str, bond: str, mode: str = "lacp", cfg: PortMode = PortMode.ACCESS) -> EthernetPortConfig:
    vlan = VlanId(2001) if cfg is PortMode.ACCESS else None
    return EthernetPortConfig("leaf01", port, cfg, vlan, bond=bond, bond_mode=mode)


@pytest.mark.parametrize(
    ("dialect", "port", "bond", "mode", "lines"),
    [
        ("eos", "Ethernet7", "Port-Channel10", "lacp",
         ["configure session gpf", "interface Ethernet7", "channel-group 10 mode active", "no shutdown", "exit", "end"]),
        ("eos", "Ethernet7", "Port-Channel10", "active-backup",
         ["configure session gpf", "interface Ethernet7", "channel-group 10 mode on", "no shutdown", "exit", "end"]),
        ("nxos", "Ethernet1/11", "port-channel10", "lacp",
         ["terminal dont-ask", "checkpoint file gpf.chk", "no terminal dont-ask", "configure terminal", "interface Ethernet1/11",
          "switchport", "channel-group 10 force mode active", "no shutdown", "exit", "end"]),
        ("nxos", "Ethernet1/11", "port-channel10", "active-backup",
         ["terminal dont-ask", "checkpoint file gpf.chk", "no terminal dont-ask", "configure terminal", "interface Ethernet1/11",
          "switchport", "channel-group 10 force mode on", "no shutdown", "exit", "end"]),
        ("os10", "ethernet1/1/7", "port-channel10", "lacp",
         ["configure terminal", "interface ethernet1/1/7", "channel-group 10 mode active", "no shutdown", "exit", "end", "write memory"]),
        ("os10", "ethernet1/1/7", "port-channel10", "active-backup",
         ["configure terminal", "interface ethernet1/1/7", "channel-group 10 mode on", "no shutdown", "exit", "end", "write memory"]),
        ("junos", "ge-0/0/7", "ae10", "lacp",
         ["configure private", "delete interfaces ge-0/0/7 unit 0 family ethernet-switching", "delete interfaces ge-0/0/7 unit 0",
          "set interfaces ge-0/0/7 ether-options 802.3ad ae10", "set interfaces ae10 aggregated-ether-options lacp active",
          "delete interfaces ge-0/0/7 disable", "commit and-quit"]),
        ("junos", "ge-0/0/7", "ae10", "active-backup",
         ["configure private", "delete interfaces ge-0/0/7 unit 0 family ethernet-switching", "delete interfaces ge-0/0/7 unit 0",
          "set interfaces ge-0/0/7 ether-options 802.3ad ae10", "delete interfaces ae10 aggregated-ether-options lacp",
          "delete interfaces ge-0/0/7 disable", "commit and-quit"]),
        ("nvue", "swp7", "bond10", "lacp",
         ["nv config detach", "nv unset interface swp7 bridge domain br_default", "nv set interface bond10 bond member swp7",
          "nv set interface bond10 bond mode lacp", "nv set interface swp7 link state up", "nv config apply --assume-yes",
          "nv config save"]),
        ("nvue", "swp7", "bond10", "active-backup",
         ["nv config detach", "nv unset interface swp7 bridge domain br_default", "nv set interface bond10 bond member swp7",
          "nv set interface bond10 bond mode static", "nv set interface swp7 link state up", "nv config apply --assume-yes",
          "nv config save"]),
        ("sonic", "Ethernet24", "PortChannel10", "lacp",
         ["sudo config portchannel member add PortChannel10 Ethernet24", "sudo config interface startup Ethernet24",
          "sudo config save -y"]),
        ("os9", "TenGigabitEthernet0/7", "Port-channel10", "lacp",
         ["configure terminal", "interface TenGigabitEthernet 0/7", "no switchport", "port-channel-protocol LACP",
          "port-channel 10 mode active", "exit", "exit", "interface TenGigabitEthernet 0/7", "no shutdown", "exit", "end",
          "write memory"]),
        ("os9", "TenGigabitEthernet0/7", "Port-channel10", "active-backup",
         ["configure terminal", "interface TenGigabitEthernet 0/7", "no switchport", "exit", "interface Port-channel 10",
          "channel-member TenGigabitEthernet 0/7", "exit", "interface TenGigabitEthernet 0/7", "no shutdown", "exit", "end",
          "write memory"]),
    ],
)  # fmt: skip
def test_rendered_membership_lines(dialect: str, port: str, bond: str, mode: str, lines: list[str]) -> None:
    d = load_dialect(dialect)
    assert list(render_batch(d, [_back(port, bond, mode)], quarantine=Q, current=SwitchState("leaf01"))) == lines


def test_a_member_of_a_quarantined_aggregate_joins_it_without_no_shutdown() -> None:
    got = render_batch(load_dialect("eos"), [_back("Ethernet7", "Port-Channel10", cfg=PortMode.SHUTDOWN)], quarantine=Q)
    assert "no shutdown" not in got and "channel-group 10 mode active" in got


@pytest.mark.parametrize("dialect", ["ovs"])
def test_a_dialect_without_membership_template_renders_the_rest_of_the_batch(dialect: str) -> None:
    """No membership template (OVS: a bond's members are interfaces of its one port), no lines:
    the member is left out, never blocking the batch's other changes (a quarantine); the plan
    keeps it and the audit reports it."""
    d, shut = load_dialect(dialect), EthernetPortConfig("leaf01", "p2", PortMode.SHUTDOWN)
    cur = SwitchState("leaf01")
    assert render_batch(d, [_back("p1", "bond10")], quarantine=Q, current=cur) == ()
    assert render_batch(d, [_back("p1", "bond10"), shut], quarantine=Q, current=cur) == render_batch(
        d, [shut], quarantine=Q, current=cur
    )


def test_an_aggregate_without_a_number_is_refused() -> None:
    with pytest.raises(ValidationError) as e:
        render_batch(load_dialect("eos"), [_back("Ethernet7", "Port-Channel")], quarantine=Q)
    assert e.value.field == "bond"


def test_aggregate_key() -> None:
    assert {aggregate_key(n) for n in ("Port-Channel10", "port-channel10", "Po10", "Port-channel 10")} == {"port-channel10"}
    assert aggregate_key("ae3") == "ae3" and aggregate_key("Port-Channel1") != aggregate_key("Port-Channel10")


EOS = """\
interface Port-Channel10
   switchport access vlan 2001
!
interface Port-Channel11
   switchport access vlan 2001
!
interface Ethernet1
   channel-group 10 mode active
!
interface Ethernet2
   switchport access vlan 2001
!
interface Ethernet3
   channel-group 11 mode active
!
"""


def test_parser_reads_members_with_their_channel() -> None:
    st = parse_running_config(load_dialect("eos"), EOS, switch="leaf01")
    assert [(p.port, p.bond, p.vlan) for p in st.ports] == [
        ("Ethernet1", "Port-Channel10", VlanId(2001)), ("Ethernet2", "", VlanId(2001)),
        ("Ethernet3", "Port-Channel11", VlanId(2001)), ("Port-Channel10", "", VlanId(2001)), ("Port-Channel11", "", VlanId(2001)),
    ]  # fmt: skip


def test_audit_finds_members_outside_their_aggregate_on_a_parsed_state() -> None:
    nodes = inventory_from_dict({"version": 1, "nodes": [{"name": "gpu-b01", "ethernet": [
        {"name": f"eth{i}", "switch": "leaf01", "switch_port": f"Ethernet{i}", "bond": "Port-Channel10"} for i in (1, 2, 3)
    ]}]}).nodes  # fmt: skip
    t = _tenancy(nodes)
    st = parse_running_config(load_dialect("eos"), EOS, switch="leaf01")
    got = [(v.invariant, v.severity.value, v.port, v.message) for v in KIND.audit(t, KIND.desired(t), (st,)) if v.invariant == OUT_ID]
    assert got == [
        (OUT_ID, "high", "Ethernet2", "gpu-b01 eth2: member leaf01/Ethernet2 is outside any aggregate, not in Port-Channel10"),
        (OUT_ID, "high", "Ethernet3", "gpu-b01 eth3: member leaf01/Ethernet3 is in Port-Channel11, not in Port-Channel10"),
    ]
    assert OUT_ID in {s.id for s in KIND.invariants()}


def test_the_ovsdb_driver_never_moves_a_port_into_a_bond() -> None:
    """An OVS bond's members are interfaces of its one Port (never read as ports, so never a
    change); a Port that a plan would put in a bond is left alone: nothing to apply, no connection."""
    from gpufabric.fabrics.ethernet.drivers.ovsdb.driver import OvsdbSwitchDriver

    drv = OvsdbSwitchDriver("leaf01", "tcp:127.0.0.1:1", Q, 1)  # nothing listens there
    drv.apply([_back("l2", "lb")])  # returns before connecting


MEMBERS_READ = {
    "junos": ("set interfaces ae3 unit 0 family ethernet-switching interface-mode trunk\n"
              "set interfaces ae3 unit 0 family ethernet-switching vlan members [ 2001 2002 ]\n"
              "set interfaces ge-0/0/1 ether-options 802.3ad ae3\n"
              "set interfaces ge-0/0/2 gigether-options 802.3ad ae3\n"
              "set interfaces ge-0/0/2 disable\n"
              "set interfaces ge-0/0/3 unit 0 family ethernet-switching vlan members 2001\n"
              "set interfaces ge-0/0/4 ether-options 802.3ad ae5\n"
              "set interfaces ae5 unit 0 family inet address 192.0.2.1/31\n",
              ("ge-0/0/1", "ge-0/0/2", "ge-0/0/3", "ae3")),
    "nvue": ('[{"header": {}}, {"set": {"bridge": {"domain": {"br_default": {"vlan": {"2001-2002": {}}}}}, "interface": {'
             '"bond3": {"type": "bond", "bond": {"member": {"swp1-2": {}}, "mode": "lacp"},'
             ' "bridge": {"domain": {"br_default": {"vlan": {"2001-2002": {}}, "untagged": "none"}}}},'
             '"swp2": {"type": "swp", "link": {"state": "down"}},'
             '"swp3": {"type": "swp", "bridge": {"domain": {"br_default": {"access": 2001}}}},'
             '"bond5": {"type": "bond", "bond": {"member": {"swp4": {}}}, "ip": {"address": {"192.0.2.1/31": {}}}}}}}]',
             ("swp1", "swp2", "swp3", "bond3")),
    "sonic": ('{"PORT": {"Ethernet0": {"admin_status": "up"}, "Ethernet4": {"admin_status": "down"},'
              ' "Ethernet8": {"admin_status": "up"}, "Ethernet12": {"admin_status": "up"}},'
              ' "PORTCHANNEL": {"PortChannel3": {"admin_status": "up"}, "PortChannel5": {"admin_status": "up"}},'
              ' "PORTCHANNEL_MEMBER": {"PortChannel3|Ethernet0": {}, "PortChannel3|Ethernet4": {}, "PortChannel5|Ethernet12": {}},'
              ' "VLAN": {"Vlan2001": {"vlanid": "2001"}, "Vlan2002": {"vlanid": "2002"}},'
              ' "VLAN_MEMBER": {"Vlan2001|PortChannel3": {"tagging_mode": "tagged"}, "Vlan2002|PortChannel3": {"tagging_mode": "tagged"},'
              ' "Vlan2001|Ethernet8": {"tagging_mode": "untagged"}}}',
              ("Ethernet0", "Ethernet4", "Ethernet8", "PortChannel3")),
}  # fmt: skip


@pytest.mark.parametrize("dialect", sorted(MEMBERS_READ))
def test_junos_nvue_sonic_members_are_read_with_their_aggregate(dialect: str) -> None:
    """A member: its aggregate's VLANs and ``bond`` (its own disable / link / admin down: SHUTDOWN,
    still in it); a plain port: no bond; a member of a routed aggregate (ae5 inet, bond5 with an
    address, PortChannel5 in no VLAN): not read."""
    text, (m1, m2, plain, agg) = MEMBERS_READ[dialect]
    st = parse_running_config(load_dialect(dialect), text, switch="leaf01")
    trunk = (VlanId(2001), VlanId(2002))
    assert {p.port: (p.mode, p.vlan, p.trunks, p.bond) for p in st.ports} == {
        m1: (PortMode.TRUNK, None, trunk, agg), m2: (PortMode.SHUTDOWN, None, (), agg),
        plain: (PortMode.ACCESS, VlanId(2001), (), ""), agg: (PortMode.TRUNK, None, trunk, ""),
    }  # fmt: skip


NVUE_YAML = """- header:
    model: VX
    version: Cumulus Linux 5.4.0
- set:
    bridge:
      domain:
        br_default:
          vlan:
            '2001': {}
    interface:
      bond3:
        bond:
          lacp-bypass: on
          member:
            swp1: {}
            swp2: {}
        bridge:
          domain:
            br_default:
              access: 2001
        type: bond
      swp2:
        link:
          state:
            down: {}
        type: swp
      swp5:
        link:
          state:
            down: {}
        bridge:
          domain:
            br_default:
              access: 2001
      swp6:
        link:
          state:
            up: {}
        bridge:
          domain:
            br_default:
              access: 2001
"""


def test_nvue_yaml_and_its_link_state_form_are_read() -> None:
    """NVUE shows its configuration as YAML by default (and saves it as startup.yaml) and writes
    a link state as a key (``state: {down: {}}``, as the real Cumulus 5.x files in
    tests/fixtures/real/ethernet/nvue/ write ``state: {up: {}}``): both read, a member whose link
    is down stays in its bond, shut."""
    st = parse_running_config(load_dialect("nvue"), NVUE_YAML, switch="leaf01")
    assert {p.port: (p.mode, p.vlan, p.bond) for p in st.ports} == {
        "bond3": (PortMode.ACCESS, VlanId(2001), ""), "swp1": (PortMode.ACCESS, VlanId(2001), "bond3"),
        "swp2": (PortMode.SHUTDOWN, None, "bond3"), "swp5": (PortMode.SHUTDOWN, None, ""),
        "swp6": (PortMode.ACCESS, VlanId(2001), ""),
    }  # fmt: skip
