"""Every audit invariant, passing and violated, on the small scenarios of audit_scenarios.

Each case mutates the clean cluster, runs the audit restricted to one invariant, and
asserts the exact (port or GUID, node) of every violation it reports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from gpufabric.audit import Severity, Violation, run_audit
from gpufabric.domain.errors import ValidationError
from gpufabric.domain.models import Fabric
from gpufabric.domain.state import SmSeen, SmState

from unit.audit_scenarios import (
    REGISTRY,
    ROGUE_GUID,
    SM_GUID,
    T0,
    UNKNOWN_GUID,
    UPLINK,
    Scenario,
    guid,
    trunk,
)


def g(node: str, i: int) -> str:
    return str(guid(node, i))


@dataclass(frozen=True)
class Case:
    id: str
    invariant: str
    mutate: Callable[[Scenario], object]
    expect: tuple[tuple[str, str], ...]  # (port or GUID, node) of each violation; () = passes
    resource: str | None = None  # expected resource of the (single) violation


def _noop(s: Scenario) -> None:
    pass


def _add_sm(s: Scenario, sm: SmSeen, master: bool = False) -> None:
    s.sms.append(sm)
    if master:
        s.master = sm.guid


def _hardening(s: Scenario) -> None:
    s.extra.append(Violation("IB-HARDENING", Severity.CRITICAL, f"SM {SM_GUID} on sm1 runs with sm_key 0x0",
                             Fabric.INFINIBAND, "sm1", str(SM_GUID), "sm1"))  # fmt: skip


def _no_desired(s: Scenario) -> None:
    s.give_desired = False
    s.set_eth("a1", "access", 2002)
    s.set_pkeys(guid("a1", 0), 0x7FFF)


def _desired_trunk(s: Scenario) -> None:
    s.desired_eth_override[("leaf1", "p1")] = trunk("leaf1", "p1", 2001, 2003, 2001)
    s.set_eth("a1", "trunk", 2001, 2001, 2003)


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
    # ------------------------------------------------------------- IB-PKEY-SHARED
    Case("clean", "IB-PKEY-SHARED", _noop, ()),
    Case("limited-members-only-cannot-talk", "IB-PKEY-SHARED",
         lambda s: (s.set_pkeys(guid("a1", 0), 0x0A05, 0x7FFF), s.set_pkeys(guid("b1", 0), 0x0A05, 0x7FFF)), ()),
    Case("beta-port-limited-in-alpha-pkey", "IB-PKEY-SHARED", lambda s: s.set_pkeys(guid("b1", 0), 0x0A01, 0x7FFF),
         ((g("b1", 0), "b1"),), "pkey:0x0a01"),
    Case("quarantined-port-full-in-beta-pkey", "IB-PKEY-SHARED", lambda s: s.set_pkeys(guid("q1", 1), 0x8A02, 0x7FFF),
         ((g("q1", 1), "q1"),), "pkey:0x0a02"),
    Case("unknown-guid-in-alpha-pkey", "IB-PKEY-SHARED", lambda s: s.set_pkeys(UNKNOWN_GUID, 0x8A01, 0x7FFF),
         ((str(UNKNOWN_GUID), ""),)),
    # ------------------------------------------------------------- IB-GUID-FOREIGN-PKEY
    Case("clean", "IB-GUID-FOREIGN-PKEY", _noop, ()),
    Case("sm-port-in-tenant-pkey-exempt", "IB-GUID-FOREIGN-PKEY", lambda s: s.set_pkeys(SM_GUID, 0xFFFF, 0x8A01), ()),
    Case("alpha-port-holds-beta-pkey-limited", "IB-GUID-FOREIGN-PKEY",
         lambda s: s.set_pkeys(guid("a2", 1), 0x8A01, 0x0A02, 0x7FFF), ((g("a2", 1), "a2"),), "pkey:0x0a02"),
    Case("quarantined-port-keeps-old-pkey", "IB-GUID-FOREIGN-PKEY",
         lambda s: s.set_pkeys(guid("q1", 0), 0x8A01, 0x7FFF), ((g("q1", 0), "q1"),), "pkey:0x0a01"),
    Case("gamma-port-holds-unowned-pkey", "IB-GUID-FOREIGN-PKEY",
         lambda s: s.set_pkeys(guid("g1", 0), 0x8A07, 0x7FFF), ((g("g1", 0), "g1"),), "pkey:0x0a07"),
    # ------------------------------------------------------------- IB-DEFAULT-FULL-HOST
    Case("clean-sm-full-default", "IB-DEFAULT-FULL-HOST", _noop, ()),
    Case("host-full-default", "IB-DEFAULT-FULL-HOST", lambda s: s.set_pkeys(guid("a1", 0), 0x8A01, 0xFFFF),
         ((g("a1", 0), "a1"),), "pkey:0x7fff"),
    Case("unknown-guid-full-default", "IB-DEFAULT-FULL-HOST", lambda s: s.set_pkeys(UNKNOWN_GUID, 0xFFFF),
         ((str(UNKNOWN_GUID), ""),)),
    # ------------------------------------------------------------- IB-ROGUE-SM
    Case("clean-trusted-master-and-standby", "IB-ROGUE-SM", _noop, ()),
    Case("untrusted-standby", "IB-ROGUE-SM",
         lambda s: _add_sm(s, SmSeen(ROGUE_GUID, 9, 1, SmState.STANDBY, "rogue-host")),
         ((str(ROGUE_GUID), "rogue-host"),)),
    Case("untrusted-master-not-in-sm-list", "IB-ROGUE-SM", lambda s: setattr(s, "master", ROGUE_GUID),
         ((str(ROGUE_GUID), ""),)),
    Case("untrusted-master-listed-once", "IB-ROGUE-SM",
         lambda s: _add_sm(s, SmSeen(ROGUE_GUID, 9, 15, SmState.MASTER, "rogue-host"), master=True),
         ((str(ROGUE_GUID), "rogue-host"),)),
    # ------------------------------------------------------------- IB-PKEY-CAPACITY
    Case("clean", "IB-PKEY-CAPACITY", _noop, ()),
    Case("capacity-unknown", "IB-PKEY-CAPACITY",
         lambda s: s.set_pkeys(guid("a1", 0), 0x8A01, 0x8A02, 0x8A03, 0x7FFF, capacity=0), ()),
    Case("desired-exceeds-capacity", "IB-PKEY-CAPACITY",
         lambda s: s.set_pkeys(guid("a1", 0), 0x8A01, capacity=1), ((g("a1", 0), "a1"),)),
    Case("observed-exceeds-capacity", "IB-PKEY-CAPACITY",
         lambda s: s.set_pkeys(guid("b1", 1), 0x8A02, 0x8A03, 0x8A04, 0x8A05, 0x7FFF, capacity=4),
         ((g("b1", 1), "b1"),)),
    # ------------------------------------------------------------- X-NODE-SPLIT
    Case("clean-gamma-without-ib-network", "X-NODE-SPLIT", _noop, ()),
    Case("eth-shut-down-ib-in-tenant", "X-NODE-SPLIT", lambda s: s.set_eth("a1", "shutdown"), ()),
    Case("eth-moved-ib-still-old-tenant", "X-NODE-SPLIT", lambda s: s.set_eth("a2", "access", 2002),
         (("p1", "a2"),)),
    Case("quarantined-node-ib-keeps-tenant-pkey", "X-NODE-SPLIT",
         lambda s: s.set_pkeys(guid("q1", 0), 0x8A01, 0x7FFF), ((g("q1", 0), "q1"),)),
    Case("one-trunk-carries-two-tenants", "X-NODE-SPLIT", lambda s: s.set_eth("g1", "trunk", 2010, 2002),
         (("p3", "g1"),)),
    Case("two-active-leases", "X-NODE-SPLIT", lambda s: s.lease("a1", "beta"), (("", "a1"),)),
    # ------------------------------------------------------------- X-DRIFT
    Case("clean", "X-DRIFT", _noop, ()),
    Case("no-desired-given-only-presence-checked", "X-DRIFT", _no_desired, ()),
    Case("trunk-vlan-order-ignored", "X-DRIFT", _desired_trunk, ()),
    Case("eth-port-differs", "X-DRIFT", lambda s: s.set_eth("a1", "access", 2003), (("p1", "a1"),)),
    Case("eth-port-not-observed", "X-DRIFT", lambda s: s.drop_eth("b1"), (("p2", "b1"),)),
    Case("ib-table-missing-pkey", "X-DRIFT", lambda s: s.set_pkeys(guid("a1", 1), 0x7FFF), ((g("a1", 1), "a1"),)),
    Case("ib-tenant-table-not-observed", "X-DRIFT", lambda s: s.drop_table(guid("a1", 0)), ((g("a1", 0), "a1"),)),
    Case("ib-quarantined-port-cut-off-is-no-drift", "X-DRIFT", lambda s: s.drop_table(guid("q1", 0)), ()),
    Case("lease-ended-fabric-not-updated", "X-DRIFT", lambda s: s.unlease("g1"),
         (("p3", "g1"),)),  # g1 has no pkeys, so only its eth port drifts
    # ------------------------------------------------------------- IB-HARDENING
    Case("no-findings", "IB-HARDENING", _noop, ()),
    Case("driver-finding-passed-through", "IB-HARDENING", _hardening, ((str(SM_GUID), "sm1"),)),
    # ------------------------------------------------------------- IB-SM-GUID-MISMATCH
    Case("sms-answer-where-discovered", "IB-SM-GUID-MISMATCH",
         lambda s: setattr(s, "sms", [SmSeen(SM_GUID, 1, 15, SmState.MASTER, "sm1", SM_GUID)]), ()),
    Case("rogue-claims-trusted-guid", "IB-SM-GUID-MISMATCH",
         lambda s: _add_sm(s, SmSeen(SM_GUID, 9, 15, SmState.MASTER, "g1", ROGUE_GUID)), ((str(ROGUE_GUID), "g1"),),
         "lid:9"),
    # ------------------------------------------------------------- TRANSPORT-INSECURE
    Case("secure-transports", "TRANSPORT-INSECURE", _noop, ()),
    Case("ssh-insecure-passed-through", "TRANSPORT-INSECURE", lambda s: s.extra.append(
        Violation("TRANSPORT-INSECURE", Severity.HIGH, "SSH to leaf1 accepts any host key", Fabric.ETHERNET,
                  "leaf1", resource="transport:insecure")), (("", ""),), "transport:insecure"),
]  # fmt: skip


def _audit(case: Case) -> tuple[Violation, ...]:
    s = Scenario()
    case.mutate(s)
    return run_audit(s.build(), only=[case.invariant], now=T0, registry=REGISTRY).violations


@pytest.mark.parametrize("case", CASES, ids=[f"{c.invariant}:{c.id}" for c in CASES])
def test_invariant_case(case: Case) -> None:
    violations = _audit(case)
    assert sorted((v.port, v.node) for v in violations) == sorted(case.expect)
    assert {v.invariant for v in violations} <= {case.invariant}
    for v in violations:
        assert v.port in v.message, v.message
        assert v.node in v.message, v.message
    if case.resource is not None:
        assert [v.resource for v in violations] == [case.resource]


def test_every_invariant_has_a_passing_and_a_violating_case() -> None:
    for inv_id in REGISTRY.ids():
        mine = [c for c in CASES if c.invariant == inv_id]
        assert any(not c.expect for c in mine), f"{inv_id} has no passing case"
        assert any(c.expect for c in mine), f"{inv_id} has no violating case"


def test_clean_cluster_breaks_no_invariant() -> None:
    report = run_audit(Scenario().build(), now=T0, registry=REGISTRY)
    assert report.violations == ()
    assert report.checked == REGISTRY.ids()


def test_severity_and_fabric_come_from_the_registry() -> None:
    violations = _audit(CASES[2])  # beta-node-in-alpha-vlan
    assert [(v.severity, v.fabric, v.device, v.tenants) for v in violations] == [
        (Severity.CRITICAL, Fabric.ETHERNET, "leaf1", ("alpha", "beta"))
    ]


def test_passed_through_finding_keeps_its_severity() -> None:
    s = Scenario()
    _hardening(s)
    [v] = run_audit(s.build(), only=["IB-HARDENING"], now=T0, registry=REGISTRY).violations
    assert (v.invariant, v.severity, v.device) == ("IB-HARDENING", Severity.CRITICAL, "sm1")


def test_extra_finding_for_a_non_passthrough_invariant_is_rejected() -> None:
    s = Scenario()
    s.extra.append(Violation("ETH-VLAN1", Severity.LOW, "made up"))
    with pytest.raises(ValidationError, match="extra_findings.invariant"):
        run_audit(s.build(), registry=REGISTRY)


def test_unknown_invariant_in_only_is_rejected() -> None:
    with pytest.raises(ValidationError, match="ETH-NOPE"):
        run_audit(Scenario().build(), only=["ETH-NOPE"], registry=REGISTRY)


def test_one_fault_shows_up_under_every_invariant_it_breaks() -> None:
    s = Scenario().set_pkeys(guid("q1", 0), 0x8A01, 0x7FFF)  # a quarantined port kept alpha's key
    report = run_audit(s.build(), now=T0, registry=REGISTRY)
    assert sorted(v.invariant for v in report.violations) == [
        "IB-GUID-FOREIGN-PKEY", "IB-PKEY-SHARED", "X-DRIFT", "X-NODE-SPLIT"
    ]  # fmt: skip
    assert {v.port for v in report.violations} == {g("q1", 0)}
