"""Bond members on the Junos, SONiC and NVUE parsers end to end (issue 21): a member pulled out
of its aggregate (carrying a VLAN of its own) and one moved into another aggregate are read
from the switch's own configuration, so the plan puts both back into the inventory's aggregate
and the audit reports ETH-BOND-MEMBER-OUT for each, as on the IOS-like and OS9 dialects."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import Lease, Network
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.audit.bonds import OUT_ID
from gpufabric.fabrics.ethernet.drivers.ssh.dialects import load_dialect
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.ethernet.readers.running_config import parse_running_config
from gpufabric.fabrics.ethernet.state import PortMode
from gpufabric.workflow.inventory import inventory_from_dict

from support.segments import segment

KIND = EthernetKind()
T0 = datetime(2026, 1, 1, tzinfo=UTC)

# per dialect: the config (m1 in A, m2 pulled out with VLAN 3000 of its own, m3 moved into B,
# A access 2001, B access 3000) and the names (m1, m2, m3, A, B)
CONFIGS = {
    "junos": ("set interfaces ae10 unit 0 family ethernet-switching interface-mode access\n"
              "set interfaces ae10 unit 0 family ethernet-switching vlan members 2001\n"
              "set interfaces ae11 unit 0 family ethernet-switching interface-mode access\n"
              "set interfaces ae11 unit 0 family ethernet-switching vlan members 3000\n"
              "set interfaces xe-0/0/1 ether-options 802.3ad ae10\n"
              "set interfaces xe-0/0/2 unit 0 family ethernet-switching vlan members 3000\n"
              "set interfaces xe-0/0/3 gigether-options 802.3ad ae11\n",
              ("xe-0/0/1", "xe-0/0/2", "xe-0/0/3", "ae10", "ae11")),
    "sonic": ('{"PORT": {"Ethernet0": {"admin_status": "up"}, "Ethernet4": {"admin_status": "up"},'
              ' "Ethernet8": {"admin_status": "up"}},'
              ' "PORTCHANNEL": {"PortChannel0010": {"admin_status": "up"}, "PortChannel0011": {"admin_status": "up"}},'
              ' "PORTCHANNEL_MEMBER": {"PortChannel0010|Ethernet0": {}, "PortChannel0011|Ethernet8": {}},'
              ' "VLAN": {"Vlan2001": {"vlanid": "2001"}, "Vlan3000": {"vlanid": "3000"}},'
              ' "VLAN_MEMBER": {"Vlan2001|PortChannel0010": {"tagging_mode": "untagged"},'
              ' "Vlan3000|PortChannel0011": {"tagging_mode": "untagged"}, "Vlan3000|Ethernet4": {"tagging_mode": "untagged"}}}',
              ("Ethernet0", "Ethernet4", "Ethernet8", "PortChannel0010", "PortChannel0011")),
    "nvue": ("- header:\n    model: VX\n- set:\n    interface:\n"
             "      bond1:\n        bond:\n          member:\n            swp1: {}\n"
             "        bridge:\n          domain:\n            br_default:\n              access: 2001\n"
             "      bond2:\n        bond:\n          member:\n            swp3: {}\n"
             "        bridge:\n          domain:\n            br_default:\n              access: 3000\n"
             "      swp2:\n        bridge:\n          domain:\n            br_default:\n              access: 3000\n",
             ("swp1", "swp2", "swp3", "bond1", "bond2")),
}  # fmt: skip


def _tenancy(dialect: str) -> Tenancy:
    m1, m2, m3, agg, _ = CONFIGS[dialect][1]
    eth = [{"name": f"eth{i}", "switch": "leaf01", "switch_port": m, "bond": agg, "bond_mode": "lacp"}
           for i, m in enumerate((m1, m2, m3))]  # fmt: skip
    nodes = inventory_from_dict({"version": 1, "nodes": [{"name": "gpu-b01", "ethernet": eth}]}).nodes
    net = Network("n1", "acme", (segment("ethernet", 2001, vlan=VlanId(2001)),))
    return Tenancy(nodes, {"gpu-b01": Lease("acme", "gpu-b01", T0, networks=("n1",))}, {("acme", "n1"): net},
                   settings={"quarantine_vlan": 4000})  # fmt: skip


@pytest.mark.parametrize("dialect", sorted(CONFIGS))
def test_members_in_out_and_in_another_aggregate_are_read(dialect: str) -> None:
    text, (m1, m2, m3, a, b) = CONFIGS[dialect]
    st = parse_running_config(load_dialect(dialect), text, switch="leaf01")
    acc = PortMode.ACCESS
    assert {p.port: (p.mode, p.vlan, p.bond) for p in st.ports} == {
        m1: (acc, VlanId(2001), a), m2: (acc, VlanId(3000), ""), m3: (acc, VlanId(3000), b),
        a: (acc, VlanId(2001), ""), b: (acc, VlanId(3000), ""),
    }  # fmt: skip


@pytest.mark.parametrize("dialect", sorted(CONFIGS))
def test_plan_puts_back_a_pulled_out_and_a_moved_member(dialect: str) -> None:
    text, (_, m2, m3, a, b) = CONFIGS[dialect]
    t = _tenancy(dialect)
    plan = KIND.diff(KIND.desired(t), (parse_running_config(load_dialect(dialect), text, switch="leaf01"),))
    assert [str(c) for c in plan.changes] == [
        f"ethernet leaf01/{m2}: access 3000 -> member of {a}",
        f"ethernet leaf01/{m3}: member of {b} -> member of {a}",
    ]
    assert {(c.after.port, c.after.mode, c.after.vlan, c.after.bond, c.after.bond_mode) for c in plan.changes} == {
        (m, PortMode.ACCESS, VlanId(2001), a, "lacp") for m in (m2, m3)
    }


@pytest.mark.parametrize("dialect", sorted(CONFIGS))
def test_audit_reports_the_pulled_out_and_the_moved_member(dialect: str) -> None:
    text, (_, m2, m3, a, b) = CONFIGS[dialect]
    t = _tenancy(dialect)
    st = parse_running_config(load_dialect(dialect), text, switch="leaf01")
    got = [(v.invariant, v.port, v.message) for v in KIND.audit(t, KIND.desired(t), (st,)) if v.invariant == OUT_ID]
    assert got == [
        (OUT_ID, m2, f"gpu-b01 eth1: member leaf01/{m2} is outside any aggregate, not in {a}"),
        (OUT_ID, m3, f"gpu-b01 eth2: member leaf01/{m3} is in {b}, not in {a}"),
    ]


def test_junos_link_protection_roles_do_not_name_the_aggregate() -> None:
    """``802.3ad`` takes ``aeN`` or, as a statement of its own, ``primary`` / ``backup`` (link
    protection, Junos reference "802.3ad (edit interfaces)") and ``lacp ...``: ``display set``
    prints each as its own line, and a member stays in its ``aeN`` whatever the line order."""
    text = (
        "set interfaces ae3 unit 0 family ethernet-switching vlan members 2001\n"
        "set interfaces ge-0/0/1 gigether-options 802.3ad ae3\n"
        "set interfaces ge-0/0/1 gigether-options 802.3ad primary\n"
        "set interfaces ge-0/0/2 gigether-options 802.3ad ae3\n"
        "set interfaces ge-0/0/2 gigether-options 802.3ad backup\n"
        "set interfaces ge-0/0/3 fastether-options 802.3ad ae3\n"
        "set interfaces ge-0/0/3 ether-options 802.3ad lacp force-up\n"
    )
    st = parse_running_config(load_dialect("junos"), text, switch="leaf01")
    assert {p.port: (p.mode, p.vlan, p.bond) for p in st.ports} == {
        "ae3": (PortMode.ACCESS, VlanId(2001), ""),
        **{f"ge-0/0/{i}": (PortMode.ACCESS, VlanId(2001), "ae3") for i in (1, 2, 3)},
    }
