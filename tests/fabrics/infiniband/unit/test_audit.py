"""The InfiniBand kind's audit invariants (fabrics/infiniband/audit.py), passing and violated,
on the small scenarios of audit_scenarios: each case mutates the clean cluster, runs the audit
restricted to one invariant, and asserts the exact (GUID, node) of every violation."""

from __future__ import annotations

import pytest

from gpufabric.audit import Severity, Violation, run_audit
from gpufabric.fabrics.infiniband.state import PortCable, SmFileSeen, SmSeen, SmState

from unit.audit_scenarios import (
    IB_LEAF,
    REGISTRY,
    ROGUE_GUID,
    SM_GUID,
    T0,
    UNKNOWN_GUID,
    Case,
    Scenario,
    check_case,
    g,
    guid,
)
from unit.audit_scenarios import noop as _noop


def _add_sm(s: Scenario, sm: SmSeen, master: bool = False) -> None:
    s.sms.append(sm)
    if master:
        s.master = sm.guid


def _seen_on(s: Scenario, node: str, i: int, port: int) -> None:
    s.cabling[guid(node, i)] = PortCable(guid(node, i), IB_LEAF, port)


def _hardening(s: Scenario) -> None:
    s.extra.append(Violation("IB-HARDENING", Severity.CRITICAL, f"SM {SM_GUID} on sm1 runs with sm_key 0x0",
                             "infiniband", "sm1", str(SM_GUID), "sm1"))  # fmt: skip


CASES: list[Case] = [
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
         lambda s: _add_sm(s, SmSeen(ROGUE_GUID, 9, 1, SmState.STANDBY, "rogue-host mlx5_0")),
         ((str(ROGUE_GUID), ""),)),  # no port placed at its lid: a description names no node
    # issue 31 item 5: the rogue on q1 whose HCA says "a1 mlx5_0" is reported on q1, not a1
    Case("rogue-described-as-another-node", "IB-ROGUE-SM",
         lambda s: _add_sm(s, SmSeen(guid("q1", 0), 9, 15, SmState.MASTER, "a1 mlx5_0", guid("q1", 0)), master=True),
         ((g("q1", 0), "q1"),)),
    Case("untrusted-master-not-in-sm-list", "IB-ROGUE-SM", lambda s: setattr(s, "master", ROGUE_GUID),
         ((str(ROGUE_GUID), ""),)),
    Case("untrusted-master-listed-once", "IB-ROGUE-SM",
         lambda s: _add_sm(s, SmSeen(ROGUE_GUID, 9, 15, SmState.MASTER, "rogue-host"), master=True),
         ((str(ROGUE_GUID), ""),)),
    # ------------------------------------------------------------- IB-PKEY-CAPACITY
    Case("clean", "IB-PKEY-CAPACITY", _noop, ()),
    Case("capacity-unknown", "IB-PKEY-CAPACITY",
         lambda s: s.set_pkeys(guid("a1", 0), 0x8A01, 0x8A02, 0x8A03, 0x7FFF, capacity=0), ()),
    Case("desired-exceeds-capacity", "IB-PKEY-CAPACITY",
         lambda s: s.set_pkeys(guid("a1", 0), 0x8A01, capacity=1), ((g("a1", 0), "a1"),)),
    Case("observed-exceeds-capacity", "IB-PKEY-CAPACITY",
         lambda s: s.set_pkeys(guid("b1", 1), 0x8A02, 0x8A03, 0x8A04, 0x8A05, 0x7FFF, capacity=4),
         ((g("b1", 1), "b1"),)),
    # ------------------------------------------------------------- IB-HARDENING
    Case("no-findings", "IB-HARDENING", _noop, ()),
    Case("driver-finding-passed-through", "IB-HARDENING", _hardening, ((str(SM_GUID), "sm1"),)),
    # ------------------------------------------------------------- IB-SM-GUID-MISMATCH
    Case("sms-answer-where-discovered", "IB-SM-GUID-MISMATCH",
         lambda s: setattr(s, "sms", [SmSeen(SM_GUID, 1, 15, SmState.MASTER, "sm1", SM_GUID)]), ()),
    Case("rogue-claims-trusted-guid", "IB-SM-GUID-MISMATCH",
         lambda s: _add_sm(s, SmSeen(SM_GUID, 9, 15, SmState.MASTER, "g1", ROGUE_GUID)), ((str(ROGUE_GUID), ""),),
         "lid:9"),
    Case("rogue-on-q1-described-as-a1", "IB-SM-GUID-MISMATCH",
         lambda s: _add_sm(s, SmSeen(SM_GUID, 9, 15, SmState.MASTER, "a1 mlx5_0", guid("q1", 1))),
         ((g("q1", 1), "q1"),), "lid:9"),
    # ------------------------------------------------------------- IB-CABLING
    Case("seen-where-stored", "IB-CABLING", _noop, ()),
    Case("no-cabling-observed", "IB-CABLING", lambda s: s.cabling.clear(), ()),
    Case("a1-hca-recabled", "IB-CABLING", lambda s: _seen_on(s, "a1", 1, 30), ((g("a1", 1), "a1"),),
         f"cable:{IB_LEAF}/30"),
    Case("b1-guid-on-q1s-cable", "IB-CABLING", lambda s: _seen_on(s, "b1", 0, 9), ((g("b1", 0), "b1"),),
         f"cable:{IB_LEAF}/9"),
    # ------------------------------------------------------------- IB-SM-CONFIG-DIVERGED
    Case("standby-holds-what-was-written", "IB-SM-CONFIG-DIVERGED", lambda s: s.sm_files.extend(
        [SmFileSeen("sm-a", "master", "ab" * 32, "ab" * 32), SmFileSeen("sm-b", "standby", "ab" * 32, "ab" * 32)]), ()),
    Case("standby-edited-by-hand", "IB-SM-CONFIG-DIVERGED", lambda s: s.sm_files.extend(
        [SmFileSeen("sm-a", "master", "ab" * 32, "ab" * 32), SmFileSeen("sm-b", "standby", "cd" * 32, "ab" * 32)]),
         (("", ""),), "sm-host:sm-b"),
    # ------------------------------------------------------------- shared hosts (issue 33): q1 with two slots
    Case("slots-on-their-rails", "IB-SLOT-FOREIGN-PKEY", lambda s: s.share_q1(), ()),
    Case("alpha-pkey-on-beta-slots-rail", "IB-SLOT-FOREIGN-PKEY",
         lambda s: s.share_q1().set_pkeys(guid("q1", 1), 0x8A01, 0x7FFF), ((g("q1", 1), "q1.s2x1"),), "pkey:0x0a01"),
    Case("beta-slot-in-quarantine-keeps-its-pkey", "IB-SLOT-FOREIGN-PKEY",
         lambda s: s.share_q1().unlease("q1.s2x1"), ((g("q1", 1), "q1.s2x1"),), "pkey:0x0a02"),
    Case("one-tenant-per-rail", "IB-SLOT-SHARED-HCA", lambda s: s.share_q1(), ()),
    Case("two-tenants-on-one-rail", "IB-SLOT-SHARED-HCA",
         lambda s: s.share_q1().set_pkeys(guid("q1", 0), 0x8A01, 0x8A02, 0x7FFF), ((g("q1", 0), "q1.s1x1"),),
         "pkey:0x0a01,0x0a02"),
    Case("shared-host-is-not-guid-foreign", "IB-GUID-FOREIGN-PKEY", lambda s: s.share_q1(), ()),
    Case("shared-host-slots-are-not-a-split-node", "X-NODE-SPLIT", lambda s: s.share_q1(), ()),
    Case("slot-rail-in-two-tenants-splits-the-slot", "X-NODE-SPLIT",
         lambda s: s.share_q1().set_pkeys(guid("q1", 1), 0x8A01, 0x8A02, 0x7FFF), ((g("q1", 1), "q1.s2x1"),)),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[f"{c.invariant}:{c.id}" for c in CASES])
def test_invariant_case(case: Case) -> None:
    check_case(case)


def test_passed_through_finding_keeps_its_severity() -> None:
    s = Scenario()
    _hardening(s)
    [v] = run_audit(s.build(), only=["IB-HARDENING"], now=T0, registry=REGISTRY).violations
    assert (v.invariant, v.severity, v.device) == ("IB-HARDENING", Severity.CRITICAL, "sm1")
