"""The Ethernet kind's audit invariants (fabrics/ethernet/audit/isolation.py), passing and violated, on
the small scenarios of audit_scenarios: each case mutates the clean cluster, runs the audit
restricted to one invariant, and asserts the exact (port, node) of every violation."""

from __future__ import annotations

import pytest

from gpufabric.audit import Severity

from unit.audit_scenarios import UPLINK, Case, audit_case, check_case
from unit.audit_scenarios import noop as _noop

CASES: list[Case] = [
    # ------------------------------------------------------------- ETH-VLAN-SHARED
    Case("clean", "ETH-VLAN-SHARED", _noop, ()),
    Case("access-foreign-vlan-alone-not-shared", "ETH-VLAN-SHARED", lambda s: s.set_eth("b1", "access", 2003), ()),
    Case("beta-node-in-alpha-vlan", "ETH-VLAN-SHARED", lambda s: s.set_eth("b1", "access", 2001),
         (("p2", "b1"),), "vlan:2001"),
    Case("leased-node-in-quarantine-vlan", "ETH-VLAN-SHARED", lambda s: s.set_eth("a2", "access", 4000),
         (("p1", "a2"),), "vlan:4000"),
    Case("unowned-vlan-two-tenants-flags-all", "ETH-VLAN-SHARED",
         lambda s: (s.set_eth("a1", "trunk", 2001, 2500), s.set_eth("b1", "access", 2500)),
         (("p1", "a1"), ("p2", "b1"))),
    # ------------------------------------------------------------- ETH-UNLEASED-NOT-QUARANTINED
    Case("clean", "ETH-UNLEASED-NOT-QUARANTINED", _noop, ()),
    Case("unleased-port-shut-down", "ETH-UNLEASED-NOT-QUARANTINED", lambda s: s.set_eth("q1", "shutdown"), ()),
    Case("unleased-node-in-tenant-vlan", "ETH-UNLEASED-NOT-QUARANTINED", lambda s: s.set_eth("q1", "access", 2002),
         (("p2", "q1"),), "vlan:2002"),
    Case("lease-ended-port-left-in-tenant-vlan", "ETH-UNLEASED-NOT-QUARANTINED", lambda s: s.unlease("a1"),
         (("p1", "a1"),), "vlan:2001"),
    Case("unleased-trunk-quarantine-native-plus-tagged", "ETH-UNLEASED-NOT-QUARANTINED",
         lambda s: s.set_eth("q1", "trunk", 4000, 2001), (("p2", "q1"),), "vlan:2001,4000"),
    # ------------------------------------------------------------- ETH-TRUNK-FOREIGN-VLAN
    Case("clean", "ETH-TRUNK-FOREIGN-VLAN", _noop, ()),
    Case("trunk-own-vlans-only", "ETH-TRUNK-FOREIGN-VLAN", lambda s: s.set_eth("a1", "trunk", 2001, 2003), ()),
    Case("access-port-is-not-a-trunk", "ETH-TRUNK-FOREIGN-VLAN", lambda s: s.set_eth("a1", "access", 2002), ()),
    Case("trunk-tags-other-tenants-vlan", "ETH-TRUNK-FOREIGN-VLAN", lambda s: s.set_eth("a1", "trunk", 2001, 2002),
         (("p1", "a1"),), "vlan:2002"),
    Case("trunk-native-unowned-vlan", "ETH-TRUNK-FOREIGN-VLAN", lambda s: s.set_eth("b1", "trunk", 2500, 2002),
         (("p2", "b1"),), "vlan:2500"),
    # ------------------------------------------------------------- ETH-VLAN1
    Case("clean", "ETH-VLAN1", _noop, ()),
    Case("node-port-access-vlan-1", "ETH-VLAN1", lambda s: s.set_eth("g1", "access", 1), (("p3", "g1"),), "vlan:1"),
    Case("uplink-tags-vlan-1", "ETH-VLAN1", lambda s: s.set_port(*UPLINK, "trunk", None, 1, 2001), (("up1", ""),)),
    Case("trunk-native-vlan-1", "ETH-VLAN1", lambda s: s.set_eth("a2", "trunk", 1, 2001), (("p1", "a2"),)),
    # ------------------------------------------------------------- bonds (a2 on the MLAG bond po1)
    Case("bonded-clean", "ETH-BOND-MEMBER-VLAN", lambda s: s.bond(), ()),
    Case("member-reads-as-its-aggregate", "ETH-BOND-MEMBER-VLAN",
         lambda s: s.bond().set_port("leaf2", "p1", "access", 2001), ()),
    Case("member-with-a-vlan-of-its-own", "ETH-BOND-MEMBER-VLAN",
         lambda s: s.bond().set_port("leaf2", "p1", "access", 2002), (("p1", "a2"),), "bond:po1"),
    Case("bonded-clean", "ETH-BOND-MEMBER-OUT", lambda s: s.bond(), ()),
    Case("member-pulled-out-of-its-aggregate", "ETH-BOND-MEMBER-OUT",
         lambda s: s.bond().set_port("leaf2", "p1", "access", 2001), (("p1", "a2"),), "bond:po1"),
    Case("member-in-a-channel-the-switch-lacks", "ETH-BOND-MEMBER-OUT",
         lambda s: s.bond().set_port("leaf2", "p1", "shutdown").in_bond("leaf2", "p1", "po7"), (("p1", "a2"),), "bond:po1"),
    Case("bonded-clean", "ETH-BOND-MEMBER-DOWN", lambda s: s.bond(), ()),
    Case("member-up-in-its-aggregate", "ETH-BOND-MEMBER-DOWN",
         lambda s: s.bond().set_port("leaf2", "p1", "access", 2001).in_bond("leaf2", "p1"), ()),
    Case("member-shut-down-in-its-aggregate", "ETH-BOND-MEMBER-DOWN",
         lambda s: s.bond().set_port("leaf2", "p1", "shutdown").in_bond("leaf2", "p1"), (("p1", "a2"),), "bond:po1"),
    Case("bonded-clean", "ETH-BOND-SPLIT", lambda s: s.bond(), ()),
    Case("mlag-halves-differ", "ETH-BOND-SPLIT", lambda s: s.bond().set_port("leaf1", "po1", "access", 4000),
         (("po1", "a2"),), "bond:po1"),
    Case("bonded-node-in-a-foreign-vlan", "ETH-VLAN-SHARED", lambda s: s.bond().set_port("leaf2", "po1", "access", 2002),
         (("po1", "a2"),)),
    # ------------------------------------------------------------- shared hosts (issue 33)
    Case("shared-clean", "ETH-VM-PORT-FOREIGN", lambda s: s.shared(), ()),
    Case("vm-port-in-another-slots-vlan", "ETH-VM-PORT-FOREIGN", lambda s: s.shared().set_port("hv1", "vm3", "access", 2001),
         (("vm3", "h1"),), "vlan:2001"),
    Case("vm-ports-of-a-slot-gone-keep-its-vlan", "ETH-VM-PORT-FOREIGN", lambda s: s.shared().unlease("h1.s3x2"),
         (("vm3", "h1"), ("vm4", "h1"))),
    Case("vm-port-of-a-quarantined-slot-in-quarantine", "ETH-VM-PORT-FOREIGN",
         lambda s: s.shared().unlease("h1.s3x2").set_port("hv1", "vm3", "access", 4000).set_port("hv1", "vm4", "shutdown"), ()),
    Case("shared-clean", "ETH-UPLINK-FOREIGN-VLAN", lambda s: s.shared(), ()),
    Case("uplink-keeps-a-vlan-of-a-tenant-without-a-slot", "ETH-UPLINK-FOREIGN-VLAN",
         lambda s: s.shared().set_port("leaf1", "p8", "trunk", None, 2001, 2002, 2010), (("p8", "h1"),), "vlan:2010"),
    Case("uplink-keeps-the-vlan-of-a-slot-gone", "ETH-UPLINK-FOREIGN-VLAN", lambda s: s.shared().unlease("h1.s1x2"),
         (("p8", "h1"),), "vlan:2001"),
    Case("shared-uplink-is-no-foreign-trunk", "ETH-TRUNK-FOREIGN-VLAN", lambda s: s.shared(), ()),
    Case("shared-host-slots-share-no-vlan", "ETH-VLAN-SHARED", lambda s: s.shared(), ()),
    Case("slot-vm-port-in-another-slots-vlan-is-shared", "ETH-VLAN-SHARED",
         lambda s: s.shared().set_port("hv1", "vm3", "access", 2001), (("vm3", "h1.s3x2"),), "vlan:2001"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[f"{c.invariant}:{c.id}" for c in CASES])
def test_invariant_case(case: Case) -> None:
    check_case(case)


def test_severity_and_fabric_come_from_the_registry() -> None:
    violations = audit_case(CASES[2])  # beta-node-in-alpha-vlan
    assert [(v.severity, v.fabric, v.device, v.tenants) for v in violations] == [
        (Severity.CRITICAL, "ethernet", "leaf1", ("alpha", "beta"))
    ]


def test_a_clean_shared_host_breaks_no_invariant_of_any_check() -> None:
    """Every invariant (X-NODE-SPLIT, X-DRIFT included): the uplink carrying two tenants' VLANs and
    VM ports in two tenants are the host's design, counted for the host and for each slot."""
    from gpufabric.audit import run_audit

    from unit.audit_scenarios import REGISTRY, T0, Scenario

    assert run_audit(Scenario().shared().build(), now=T0, registry=REGISTRY).violations == ()
