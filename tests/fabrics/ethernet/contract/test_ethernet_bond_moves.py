"""A bond member moved into another aggregate goes back (issue 21), on the dialects whose members
are read from the aggregate side or its own ``802.3ad`` line (Junos, SONiC, NVUE): through the
SSH driver against each vendor-CLI double, two leased bonds (gpu-b01 on aggregate A, gpu-b02 on
aggregate B), an operator moves gpu-b01's second member into B; the read shows it in B, the
audit reports ETH-BOND-MEMBER-OUT, the plan puts it back into A only (out of B first where the
CLI wants it), the read-back shows it in A and no longer in B, and the next plan is empty."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import Lease, Network
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.audit.bonds import OUT_ID
from gpufabric.fabrics.ethernet.backend import EthernetBackend
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, SwitchState
from gpufabric.workflow.inventory import inventory_from_dict

from support.segments import segment
from support.ssh_double import double_driver, port_names
from support.ssh_double.base import CliDouble
from support.ssh_double.jsoncli import NvueDouble, SonicDouble
from support.ssh_double.junos import JunosDouble

KIND = EthernetKind()
Q = 4000
T0 = datetime(2026, 1, 1, tzinfo=UTC)
AGGS = {"junos": ("ae10", "ae11"), "nvue": ("bond10", "bond11"), "sonic": ("PortChannel10", "PortChannel11")}


def _tenancy(sw: str, bonds: dict[str, tuple[str, tuple[str, ...], int]]) -> Tenancy:
    """node -> (aggregate, members, VLAN), each node leased to its own tenant network."""
    raw = [{"name": n, "ethernet": [{"name": f"eth{i}", "switch": sw, "switch_port": m, "bond": agg, "bond_mode": "lacp"}
                                    for i, m in enumerate(ms)]} for n, (agg, ms, _) in bonds.items()]  # fmt: skip
    nodes = inventory_from_dict({"version": 1, "nodes": raw}).nodes
    nets = {
        (f"t{v}", "n"): Network("n", f"t{v}", (segment("ethernet", v, vlan=VlanId(v)),))
        for _, _, v in bonds.values()
    }
    leases = {n: Lease(f"t{v}", n, T0, networks=("n",)) for n, (_, _, v) in bonds.items()}
    return Tenancy(nodes, leases, nets, settings={"quarantine_vlan": Q})


def _p(st: SwitchState, name: str) -> EthernetPortConfig:
    got = st.port(name)
    assert got is not None, f"{name} not read"
    return got


def _in(double: CliDouble, member: str, agg: str) -> bool:
    """The double holds ``member`` in ``agg`` in the vendor's own model."""
    if isinstance(double, JunosDouble):
        return ("interfaces", member, "ether-options", "802.3ad", agg) in double.active
    if isinstance(double, NvueDouble):
        return member in ((double.applied["interface"].get(agg) or {}).get("bond") or {}).get("member", {})
    assert isinstance(double, SonicDouble)
    return f"{agg}|{member}" in double.db["PORTCHANNEL_MEMBER"]


def _move(double: CliDouble, member: str, old: str, new: str) -> None:
    """An operator moves ``member`` from ``old`` into ``new`` (one statement per vendor)."""
    if isinstance(double, JunosDouble):
        double.active = [s for s in double.active if s[:3] != ("interfaces", member, "ether-options")]
        double.active.append(("interfaces", member, "ether-options", "802.3ad", new))
    elif isinstance(double, NvueDouble):
        ifs = double.applied["interface"]
        del ifs[old]["bond"]["member"][member]
        ifs[new]["bond"]["member"][member] = {}
    else:
        assert isinstance(double, SonicDouble)
        del double.db["PORTCHANNEL_MEMBER"][f"{old}|{member}"]
        double.db["PORTCHANNEL_MEMBER"][f"{new}|{member}"] = {}


@pytest.mark.parametrize("dialect", sorted(AGGS))
def test_member_moved_to_another_aggregate_goes_back_and_the_plan_converges(dialect: str) -> None:
    sw, (a, b) = f"{dialect}-leaf", AGGS[dialect]
    m1, m2, m3 = port_names(dialect, 3)
    drv, double = double_driver(dialect, sw, (m1, m2, m3, a, b), Q)
    t = _tenancy(sw, {"gpu-b01": (a, (m1, m2), 2001), "gpu-b02": (b, (m3,), 2002)})
    desired = KIND.desired(t)
    drv.apply(KIND.diff(desired, (drv.observe(),)).by_switch()[sw])  # both leases: aggregates and members
    first = drv.observe()
    assert [(_p(first, m).bond, _p(first, m).vlan) for m in (m1, m2, m3)] == [(a, VlanId(2001))] * 2 + [
        (b, VlanId(2002))
    ]
    assert KIND.diff(desired, (first,)).empty

    _move(double, m2, a, b)
    moved = drv.observe()
    assert (_p(moved, m2).bond, _p(moved, m2).vlan) == (b, VlanId(2002))  # read in B, with B's VLAN
    assert [(v.port, v.message) for v in KIND.audit(t, desired, (moved,)) if v.invariant == OUT_ID] == [
        (m2, f"gpu-b01 eth1: member {sw}/{m2} is in {b}, not in {a}")
    ]
    plan = KIND.diff(desired, (moved,))
    assert [str(c) for c in plan.changes] == [f"ethernet {sw}/{m2}: member of {b} -> member of {a}"]
    (verified,) = EthernetBackend({sw: drv}, verify_timeout=1.0).apply(plan)
    assert [(p.port, p.bond) for p in verified.ports] == [(m2, a)]
    back = drv.observe()
    assert [(_p(back, m).bond, _p(back, m).vlan) for m in (m1, m2, m3)] == [(a, VlanId(2001))] * 2 + [(b, VlanId(2002))]
    assert (_in(double, m2, a), _in(double, m2, b)) == (True, False)
    assert KIND.diff(desired, (back,)).empty
    assert not [v for v in KIND.audit(t, desired, (back,)) if v.invariant == OUT_ID]
