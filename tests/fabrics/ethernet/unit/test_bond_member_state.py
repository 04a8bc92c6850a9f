"""Bond members whose state is wrong in a way other than their membership (issue 21, items 2-3):
a member shut down while its aggregate carries a tenant's VLANs is planned back up (and the audit
says so), and a member the switch reads in a channel the switch does not have is refused by the
plan for its node only (a plan that gives its bond a tenant's VLAN; one line naming the node, the
member and the channel), left as read otherwise, and reported by the audit; the parsers read such
a member in that channel instead of dropping it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from gpufabric.domain.errors import VerifyError
from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import Lease, Network, Node
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.audit.bonds import DOWN_ID, MEMBER_ID, OUT_ID
from gpufabric.fabrics.ethernet.backend import EthernetBackend
from gpufabric.fabrics.ethernet.drivers.ssh.dialects import load_dialect, render_batch
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.ethernet.readers.running_config import parse_running_config
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState
from gpufabric.workflow.inventory import inventory_from_dict

from support.memfabric.ethernet import MemorySwitchDriver
from support.segments import segment

KIND = EthernetKind()
Q = VlanId(4000)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
AGG = EthernetPortConfig("leaf01", "Port-Channel10", PortMode.ACCESS, VlanId(2001))


def _nodes(leased_bond: str = "Port-Channel10") -> tuple[Node, ...]:
    eth: list[dict[str, Any]] = [
        {"name": f"eth{i}", "switch": "leaf01", "switch_port": f"Ethernet{i + 1}", "bond": leased_bond} for i in range(2)
    ]
    return inventory_from_dict({"version": 1, "nodes": [{"name": "gpu-b01", "ethernet": eth}]}).nodes


def _tenancy(leased: bool = True) -> Tenancy:
    net = Network("n1", "acme", (segment("ethernet", 2001, vlan=VlanId(2001)),))
    leases = {"gpu-b01": Lease("acme", "gpu-b01", T0, networks=("n1",))} if leased else {}
    return Tenancy(_nodes(), leases, {("acme", "n1"): net}, settings={"quarantine_vlan": Q.value})


def _member(port: str, mode: PortMode = PortMode.ACCESS, bond: str = "Port-Channel10") -> EthernetPortConfig:
    return EthernetPortConfig("leaf01", port, mode, VlanId(2001) if mode is PortMode.ACCESS else None, bond=bond)


# --------------------------------------------------------------------------- a shut member
def test_a_shut_member_of_a_tenants_aggregate_is_planned_back_up() -> None:
    t = _tenancy()
    observed = (SwitchState("leaf01", (_member("Ethernet1"), _member("Ethernet2", PortMode.SHUTDOWN), AGG)),)
    plan = KIND.diff(KIND.desired(t), observed)
    assert [str(c) for c in plan.changes] == ["ethernet leaf01/Ethernet2: member of Port-Channel10 (shut down) -> member of Port-Channel10"]
    (c,) = plan.changes
    assert (c.after.mode, c.after.vlan, c.after.bond) == (PortMode.ACCESS, VlanId(2001), "Port-Channel10")
    removals, additions = plan.split()
    assert removals.empty and len(additions) == 1


def test_a_shut_member_of_a_quarantined_aggregate_stays_down() -> None:
    t = _tenancy(leased=False)  # the aggregate is SHUTDOWN: so may its members be
    shut = EthernetPortConfig("leaf01", "Port-Channel10", PortMode.SHUTDOWN)
    observed = (SwitchState("leaf01", (_member("Ethernet1", PortMode.SHUTDOWN), _member("Ethernet2", PortMode.SHUTDOWN), shut)),)
    assert KIND.diff(KIND.desired(t), observed).empty
    assert not [v for v in KIND.audit(t, KIND.desired(t), observed) if v.invariant in (DOWN_ID, MEMBER_ID, OUT_ID)]


def test_audit_reports_a_shut_member_as_down_not_as_a_vlan_leak() -> None:
    t = _tenancy()
    observed = (SwitchState("leaf01", (_member("Ethernet1"), _member("Ethernet2", PortMode.SHUTDOWN), AGG)),)
    got = [(v.invariant, v.severity.value, v.port, v.message) for v in KIND.audit(t, KIND.desired(t), observed)
           if v.invariant.startswith("ETH-BOND")]  # fmt: skip
    assert got == [
        (DOWN_ID, "medium", "Ethernet2",
         "gpu-b01 eth1: member leaf01/Ethernet2 of Port-Channel10 is shut down, its aggregate carries VLANs 2001"),
    ]  # fmt: skip
    assert DOWN_ID in {s.id for s in KIND.invariants()}


@pytest.mark.parametrize(
    ("dialect", "port", "bond", "lines"),
    [
        ("os9", "TenGigabitEthernet0/7", "Port-channel10",
         ["configure terminal", "interface TenGigabitEthernet 0/7", "no shutdown", "exit", "end", "write memory"]),
        ("sonic", "Ethernet24", "PortChannel10", ["sudo config interface startup Ethernet24", "sudo config save -y"]),
    ],
)  # fmt: skip
def test_a_shut_member_already_in_its_aggregate_is_only_brought_up(dialect: str, port: str, bond: str, lines: list[str]) -> None:
    """Where rendering sees the current state, the membership is not stated again (SONiC refuses
    to add a member twice); elsewhere it is stated again, which those CLIs take as no change."""
    cur = SwitchState("leaf01", (EthernetPortConfig("leaf01", port, PortMode.SHUTDOWN, bond=bond),))
    back = EthernetPortConfig("leaf01", port, PortMode.ACCESS, VlanId(2001), bond=bond, bond_mode="lacp")
    assert list(render_batch(load_dialect(dialect), [back], quarantine=Q, current=cur)) == lines


@pytest.mark.parametrize(
    ("dialect", "port", "old", "bond", "lines"),
    [
        ("sonic", "Ethernet24", "", "PortChannel10",
         ["sudo config vlan member del 4000 Ethernet24", "sudo config portchannel member add PortChannel10 Ethernet24",
          "sudo config interface startup Ethernet24", "sudo config save -y"]),
        ("sonic", "Ethernet24", "PortChannel11", "PortChannel10",
         ["sudo config portchannel member del PortChannel11 Ethernet24", "sudo config portchannel member add PortChannel10 Ethernet24",
          "sudo config interface startup Ethernet24", "sudo config save -y"]),
        ("nvue", "swp7", "bond11", "bond10",
         ["nv config detach", "nv unset interface swp7 bridge domain br_default", "nv unset interface bond11 bond member swp7",
          "nv set interface bond10 bond member swp7", "nv set interface bond10 bond mode lacp", "nv set interface swp7 link state up",
          "nv config apply --assume-yes", "nv config save"]),
    ],
)  # fmt: skip
def test_a_member_leaves_its_own_vlans_or_its_other_aggregate_first(
    dialect: str, port: str, old: str, bond: str, lines: list[str]
) -> None:
    was = EthernetPortConfig("leaf01", port, PortMode.ACCESS, VlanId(4000), bond=old)
    back = EthernetPortConfig("leaf01", port, PortMode.ACCESS, VlanId(2001), bond=bond, bond_mode="lacp")
    assert list(render_batch(load_dialect(dialect), [back], quarantine=Q, current=SwitchState("leaf01", (was,)))) == lines


# --------------------------------------------------------------------------- a member in a missing channel
def _two_nodes(b01_agg: EthernetPortConfig) -> tuple[Tenancy, tuple[SwitchState, ...]]:
    """gpu-b01 (Port-Channel10: Ethernet1-2, Ethernet2 read in Port-Channel12, which leaf01 does
    not have) and gpu-b02 (Port-Channel20: Ethernet3-4, all shut: being leased), both leased."""
    eth = {"gpu-b01": ("Port-Channel10", "Ethernet1", "Ethernet2"), "gpu-b02": ("Port-Channel20", "Ethernet3", "Ethernet4")}
    raw = [{"name": n, "ethernet": [{"name": f"eth{i}", "switch": "leaf01", "switch_port": m, "bond": b} for i, m in enumerate(ms)]}
           for n, (b, *ms) in eth.items()]  # fmt: skip
    nodes = inventory_from_dict({"version": 1, "nodes": raw}).nodes
    net = Network("n1", "acme", (segment("ethernet", 2001, vlan=VlanId(2001)),))
    leases = {n: Lease("acme", n, T0, networks=("n1",)) for n in eth}
    t = Tenancy(nodes, leases, {("acme", "n1"): net}, settings={"quarantine_vlan": Q.value})
    shut = [EthernetPortConfig("leaf01", p, PortMode.SHUTDOWN) for p in ("Ethernet3", "Ethernet4", "Port-Channel20")]
    ports = (_member("Ethernet1"), _member("Ethernet2", PortMode.SHUTDOWN, "Port-Channel12"), b01_agg, *shut)
    return t, (SwitchState("leaf01", ports),)


def test_a_leased_bond_with_a_member_in_a_missing_channel_does_not_block_another_nodes_plan() -> None:
    """gpu-b01's aggregate already carries its tenant: its stray member is left as read, and
    gpu-b02's plan is made (it blocked every plan while gpu-b01 was leased)."""
    t, observed = _two_nodes(AGG)
    plan = KIND.diff(KIND.desired(t), observed)
    assert [str(c) for c in plan.changes] == [
        "ethernet leaf01/Port-Channel20: shutdown -> access 2001",
        "ethernet leaf01/Ethernet3: shutdown -> member of Port-Channel20",
        "ethernet leaf01/Ethernet4: shutdown -> member of Port-Channel20",
    ]
    got = [(v.invariant, v.node, v.port) for v in KIND.audit(t, KIND.desired(t), observed) if v.invariant.startswith("ETH-BOND")]
    assert got == [(OUT_ID, "gpu-b01", "Ethernet2"), (OUT_ID, "gpu-b02", "Ethernet3"), (OUT_ID, "gpu-b02", "Ethernet4")]


REFUSAL = (
    "ethernet leaf01/Ethernet2: member of gpu-b01's bond Port-Channel10 is read in Port-Channel12, which leaf01 "
    "does not have: gpu-b01 is not given its tenant's VLANs (check the switch's configuration, then put the member back)"
)


def test_giving_the_node_a_tenant_over_a_bond_with_a_member_in_a_missing_channel_is_refused_naming_it() -> None:
    """gpu-b01's aggregate is shut and the plan would give it VLAN 2001: gpu-b01 is refused in one
    line naming the node, the member and the channel (the move engine fails the move joining it,
    alone: tests/fabrics/ethernet/unit/test_bond_missing_channel_moves.py), and nothing of its bond is planned;
    gpu-b02's changes are (every plan raised while gpu-b01 was leased)."""
    t, observed = _two_nodes(EthernetPortConfig("leaf01", "Port-Channel10", PortMode.SHUTDOWN))
    plan = KIND.diff(KIND.desired(t), observed)
    assert [c.after.port for c in plan.changes] == ["Port-Channel20", "Ethernet3", "Ethernet4"]
    ((node, e),) = plan.refusals().items()
    assert (node, str(e)) == ("gpu-b01", REFUSAL) and "\n" not in str(e)
    f = e.fields
    assert (f["node"], f["device"], f["port"], f["bond"], f["channel"]) == (
        "gpu-b01", "leaf01", "Ethernet2", "Port-Channel10", "Port-Channel12")  # fmt: skip


def test_a_refused_bond_only_loses_what_it_must_not_carry() -> None:
    """gpu-b01's aggregate carries VLAN 2005 (not its tenant's): the plan takes 2005 away and gives
    2001 nothing, leaves its members as read, and names gpu-b01 refused."""
    t, observed = _two_nodes(EthernetPortConfig("leaf01", "Port-Channel10", PortMode.ACCESS, VlanId(2005)))
    plan = KIND.diff(KIND.desired(t), observed)
    assert [str(c) for c in plan.changes if c.after.port.endswith("10") or c.after.port in ("Ethernet1", "Ethernet2")] == [
        "ethernet leaf01/Port-Channel10: access 2005 -> shutdown"
    ]
    assert set(plan.refusals()) == {"gpu-b01"}


def test_a_member_of_a_quarantined_bond_in_a_missing_channel_is_left_as_read_and_reported() -> None:
    """No plan is made from it, and none is refused: only a plan that gives the node's bond a
    tenant's VLAN is."""
    t = _tenancy(leased=False)
    shut = EthernetPortConfig("leaf01", "Port-Channel10", PortMode.SHUTDOWN)
    observed = (SwitchState("leaf01", (_member("Ethernet1", PortMode.SHUTDOWN),
                                       _member("Ethernet2", PortMode.SHUTDOWN, "Port-Channel12"), shut)),)  # fmt: skip
    assert KIND.diff(KIND.desired(t), observed).empty
    assert [(v.invariant, v.port) for v in KIND.audit(t, KIND.desired(t), observed) if v.invariant.startswith("ETH-BOND")] == [
        (OUT_ID, "Ethernet2")
    ]


def test_a_member_in_another_channel_that_exists_is_put_back() -> None:
    t = _tenancy()
    other = EthernetPortConfig("leaf01", "Port-Channel12", PortMode.ACCESS, VlanId(3000))
    observed = (SwitchState("leaf01", (_member("Ethernet1"), _member("Ethernet2", bond="Port-Channel12"), AGG, other)),)
    assert [c.after.port for c in KIND.diff(KIND.desired(t), observed).changes] == ["Ethernet2"]


def test_audit_names_the_missing_channel() -> None:
    t = _tenancy()
    observed = (SwitchState("leaf01", (_member("Ethernet1"), _member("Ethernet2", PortMode.SHUTDOWN, "Port-Channel12"), AGG)),)
    got = [(v.invariant, v.port, v.message) for v in KIND.audit(t, KIND.desired(t), observed) if v.invariant.startswith("ETH-BOND")]
    assert got == [
        (OUT_ID, "Ethernet2",
         "gpu-b01 eth1: member leaf01/Ethernet2 is in Port-Channel12, which leaf01 does not have, not in Port-Channel10"),
    ]  # fmt: skip


MISSING = {
    "eos": "interface Port-Channel10\n   switchport access vlan 2001\n!\ninterface Ethernet1\n   channel-group 10 mode active\n!\n"
    "interface Ethernet2\n   channel-group 12 mode active\n!\n",
    "os9": "interface TenGigabitEthernet 0/1\n no ip address\n port-channel-protocol LACP\n  port-channel 10 mode active\n no shutdown\n!\n"
    "interface TenGigabitEthernet 0/2\n no ip address\n port-channel-protocol LACP\n  port-channel 12 mode active\n no shutdown\n!\n"
    "interface Port-channel 10\n no ip address\n switchport\n no shutdown\n!\ninterface Vlan 2001\n untagged Port-channel 10\n!\n",
    "junos": "set interfaces ge-0/0/1 ether-options 802.3ad ae10\nset interfaces ge-0/0/2 ether-options 802.3ad ae12\n"
    "set interfaces ae10 unit 0 family ethernet-switching interface-mode access\n"
    "set interfaces ae10 unit 0 family ethernet-switching vlan members 2001\n",
    "sonic": '{"PORT": {"Ethernet0": {"admin_status": "up"}, "Ethernet4": {"admin_status": "up"}},'
    ' "PORTCHANNEL": {"PortChannel10": {"admin_status": "up"}}, "PORTCHANNEL_MEMBER": {"PortChannel10|Ethernet0": {},'
    ' "PortChannel12|Ethernet4": {}}, "VLAN": {"Vlan2001": {"vlanid": "2001"}},'
    ' "VLAN_MEMBER": {"Vlan2001|PortChannel10": {"tagging_mode": "untagged"}}}',
}
NAMES = {"eos": ("Ethernet1", "Ethernet2", "Port-Channel10", "Port-Channel12"),
         "os9": ("TenGigabitEthernet0/1", "TenGigabitEthernet0/2", "Port-channel10", "Port-channel12"),
         "junos": ("ge-0/0/1", "ge-0/0/2", "ae10", "ae12"),
         "sonic": ("Ethernet0", "Ethernet4", "PortChannel10", "PortChannel12")}  # fmt: skip


@pytest.mark.parametrize("dialect", sorted(MISSING))
def test_parsers_read_a_member_of_a_missing_channel_in_that_channel(dialect: str) -> None:
    """NVUE lists a bond's members on the bond itself: a member cannot name a missing one."""
    m1, m2, agg, missing = NAMES[dialect]
    st = parse_running_config(load_dialect(dialect), MISSING[dialect], switch="leaf01")
    got = {p.port: (p.mode, p.vlan, p.bond) for p in st.ports if p.port in (m1, m2)}
    assert got == {m1: (PortMode.ACCESS, VlanId(2001), agg), m2: (PortMode.SHUTDOWN, None, missing)}


# --------------------------------------------------------------------------- the verified read-back
def test_the_read_back_must_show_a_member_put_back_in_its_aggregate() -> None:
    """Equality leaves ``bond`` out: a switch that takes the member's VLANs but not its membership
    (the in-memory switch keeps no membership) fails the verification, naming the member."""
    drv = MemorySwitchDriver("leaf01", ["Ethernet1", "Ethernet2", "Port-Channel10"], Q)
    t = _tenancy()
    plan = KIND.diff(KIND.desired(t), (drv.observe(),))
    assert [c.after.bond for c in plan.changes] == ["", "Port-Channel10", "Port-Channel10"]
    with pytest.raises(VerifyError) as e:
        EthernetBackend({"leaf01": drv}, verify_timeout=0.05).apply(plan)
    assert [m.split("port='")[1].split("'")[0] for m in e.value.fields["mismatches"]] == ["Ethernet1", "Ethernet2"]
    assert all("bond='Port-Channel10'" in m for m in e.value.fields["mismatches"])


def test_a_fex_uplink_in_a_channel_the_config_leaves_out_is_not_read() -> None:
    """NX-OS FEX fabric uplinks sit in port-channels a running config may not show (33 of them in
    the N7K 6.2 real config ciscoconfparse-sample_01.nxos): no host port, so no refused plan."""
    text = ("interface Ethernet2/13\n  switchport\n  switchport mode fex-fabric\n  fex associate 132\n  channel-group 132\n\n"
            "interface Ethernet2/14\n  switchport\n  channel-group 12 mode active\n")  # fmt: skip
    st = parse_running_config(load_dialect("nxos"), text, switch="leaf01")
    assert [(p.port, p.mode, p.bond) for p in st.ports] == [("Ethernet2/14", PortMode.SHUTDOWN, "Port-Channel12")]  # named as parse_ios_bonds names a channel it cannot see


def test_the_structured_read_reads_a_host_port_in_a_missing_channel_in_that_channel() -> None:
    from gpufabric.fabrics.ethernet.readers.jsonread import parse_nxos_json

    from fabrics.ethernet.unit.test_jsonread import nxos_answer

    text = nxos_answer(
        [{"interface": "Ethernet1/9", "admin_state": "up", "eth_bundle": "Po20"},
         {"interface": "Ethernet1/10", "admin_state": "up", "eth_bundle": "Po30"}],
        [{"interface": "Ethernet1/9", "switchport": "Enabled", "oper_mode": "access", "access_vlan": 1},
         {"interface": "Ethernet1/10", "switchport": "Enabled", "oper_mode": "fex-fabric"}],
    )  # fmt: skip
    assert [(p.port, p.mode, p.bond) for p in parse_nxos_json(text, "leaf01", {})] == [
        ("Ethernet1/9", PortMode.SHUTDOWN, "port-channel20")
    ]
