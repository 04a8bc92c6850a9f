"""The audit core's cross-fabric invariants (X-NODE-SPLIT, X-DRIFT as the kinds report it,
TRANSPORT-INSECURE) on the small scenarios of audit_scenarios, and the rules of the run:
every invariant of the registry has a passing and a violating case (here or in the kinds'
tests under tests/fabrics/<kind>/unit/), a clean cluster breaks none, ids are checked."""

from __future__ import annotations

import pytest

from gpufabric.audit import Severity, Violation, run_audit
from gpufabric.domain.errors import ValidationError

from fabrics.ethernet.unit.test_audit import CASES as ETH_CASES
from fabrics.infiniband.unit.test_audit import CASES as IB_CASES
from unit.audit_scenarios import REGISTRY, T0, Case, Scenario, check_case, g, guid, trunk
from unit.audit_scenarios import noop as _noop


def _no_desired(s: Scenario) -> None:
    s.give_desired = False
    s.set_eth("a1", "access", 2002)
    s.set_pkeys(guid("a1", 0), 0x7FFF)


def _desired_trunk(s: Scenario) -> None:
    s.desired_eth_override[("leaf1", "p1")] = trunk("leaf1", "p1", 2001, 2003, 2001)
    s.set_eth("a1", "trunk", 2001, 2001, 2003)


CASES: list[Case] = [
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
    # ------------------------------------------------------------- TRANSPORT-INSECURE
    Case("secure-transports", "TRANSPORT-INSECURE", _noop, ()),
    Case("ssh-insecure-passed-through", "TRANSPORT-INSECURE", lambda s: s.extra.append(
        Violation("TRANSPORT-INSECURE", Severity.HIGH, "SSH to leaf1 accepts any host key", "ethernet",
                  "leaf1", resource="transport:insecure")), (("", ""),), "transport:insecure"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[f"{c.invariant}:{c.id}" for c in CASES])
def test_invariant_case(case: Case) -> None:
    check_case(case)


def test_every_invariant_has_a_passing_and_a_violating_case() -> None:
    every = [*ETH_CASES, *IB_CASES, *CASES]
    for inv_id in REGISTRY.ids():
        mine = [c for c in every if c.invariant == inv_id]
        assert any(not c.expect for c in mine), f"{inv_id} has no passing case"
        assert any(c.expect for c in mine), f"{inv_id} has no violating case"


def test_clean_cluster_breaks_no_invariant() -> None:
    report = run_audit(Scenario().build(), now=T0, registry=REGISTRY)
    assert report.violations == ()
    assert report.checked == REGISTRY.ids()


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
