"""A bond member pulled out of its aggregate goes back in (issue 21): through the SSH driver
against the vendor-CLI double of every dialect (tests/support/ssh_double), the plan puts the
member back, the apply runs on the double, the read-back shows the member in its aggregate
(port-channel, ``ae``, bond, PortChannel) with the aggregate's VLANs, and the next plan is empty.
OVS is the one dialect left out: an OVS bond's members are interfaces of its one Port, never
ports of their own, so there is no member to pull out or put back (test_the_ovsdb_driver_never_
moves_a_port_into_a_bond covers it)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import Lease, Network
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.audit.bonds import OUT_ID
from gpufabric.fabrics.ethernet.backend import EthernetBackend
from gpufabric.fabrics.ethernet.drivers.ssh.dialects import load_dialect
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState
from gpufabric.workflow.inventory import inventory_from_dict

from fabrics.ethernet.contract.ethernet_targets import DOUBLE_DIALECTS
from support.segments import segment
from support.ssh_double import AGGREGATE, double_driver, port_names
from support.ssh_double.base import CliDouble
from support.ssh_double.ios import IosDouble
from support.ssh_double.jsoncli import NvueDouble, SonicDouble
from support.ssh_double.junos import JunosDouble
from support.ssh_double.os9 import Os9Double

KIND = EthernetKind()
Q = 4000
T0 = datetime(2026, 1, 1, tzinfo=UTC)
NO_MEMBER_PORTS = {"ovs": "an OVS bond's members are interfaces of its one Port, not ports: nothing to pull out"}


def _tenancy(dialect: str, sw: str, members: tuple[str, ...], mode: str) -> Tenancy:
    eth: list[dict[str, Any]] = [
        {"name": f"eth{i}", "switch": sw, "switch_port": m, "bond": AGGREGATE[dialect], "bond_mode": mode}
        for i, m in enumerate(members)
    ]
    nodes = inventory_from_dict({"version": 1, "nodes": [{"name": "gpu-b01", "ethernet": eth}]}).nodes
    net = Network("n1", "acme", (segment("ethernet", 2001, vlan=VlanId(2001)),))
    return Tenancy(nodes, {"gpu-b01": Lease("acme", "gpu-b01", T0, networks=("n1",))}, {("acme", "n1"): net},
                   settings={"quarantine_vlan": Q})  # fmt: skip


def _p(st: SwitchState, name: str) -> EthernetPortConfig:
    got = st.port(name)
    assert got is not None, f"{name} not read"
    return got


def _joined(double: CliDouble, member: str, agg: str, mode: str) -> bool:
    """The double holds ``member`` in ``agg`` in the vendor's own model, with the bond mode."""
    lacp = mode == "lacp"
    if isinstance(double, IosDouble):
        return f"channel-group 10 mode {'active' if lacp else 'on'}" in double.blocks[member]
    if isinstance(double, JunosDouble):
        lacp_on = ("interfaces", agg, "aggregated-ether-options", "lacp", "active") in double.active
        return ("interfaces", member, "ether-options", "802.3ad", agg) in double.active and lacp_on == lacp
    if isinstance(double, NvueDouble):
        bond = double.applied["interface"][agg]["bond"]
        return member in bond["member"] and bond["mode"] == ("lacp" if lacp else "static")
    if isinstance(double, SonicDouble):  # static or LACP is the PortChannel's, set at its creation
        return f"{agg}|{member}" in double.db["PORTCHANNEL_MEMBER"]
    assert isinstance(double, Os9Double)
    if lacp:
        return "port-channel 10 mode active" in double.blocks[member]
    return f"channel-member {_os9_cli(member)}" in double.blocks[agg]


def _os9_cli(port: str) -> str:
    return port.replace("TenGigabitEthernet", "TenGigabitEthernet ", 1)


def _pull_out(double: CliDouble, member: str, agg: str) -> None:
    """An operator takes ``member`` out of its aggregate and uses it as a plain port in the
    quarantine VLAN (a member left with no config at all is, on Junos / OS9, no switching port,
    so not read: nothing to plan)."""
    if isinstance(double, IosDouble):
        double.blocks[member] = [x for x in double.blocks[member] if not x.startswith("channel-group")]
    elif isinstance(double, JunosDouble):
        fam = ("interfaces", member, "unit", "0", "family", "ethernet-switching")
        double.active = [s for s in double.active if s[:3] != ("interfaces", member, "ether-options")]
        double.active += [(*fam, "interface-mode", "access"), (*fam, "vlan", "members", str(Q))]
    elif isinstance(double, NvueDouble):
        del double.applied["interface"][agg]["bond"]["member"][member]
        double.applied["interface"][member]["bridge"] = {"domain": {"br_default": {"access": Q}}}
    elif isinstance(double, SonicDouble):
        del double.db["PORTCHANNEL_MEMBER"][f"{agg}|{member}"]
        double.db["VLAN_MEMBER"][f"Vlan{Q}|{member}"] = {"tagging_mode": "untagged"}
    else:
        assert isinstance(double, Os9Double)
        double.blocks[member] = [x for x in double.blocks[member] if not x.startswith("port-channel")] + ["switchport"]
        double.blocks[agg] = [x for x in double.blocks[agg] if x != f"channel-member {_os9_cli(member)}"]
        double.members[Q][member] = False


READS = [(d, r) for d in DOUBLE_DIALECTS for r in ("text", "json") if r == "text" or load_dialect(d).json_parser]


@pytest.mark.parametrize("mode", ["lacp", "active-backup"])
@pytest.mark.parametrize(("dialect", "read"), READS)
def test_member_pulled_out_goes_back_and_the_plan_converges(dialect: str, mode: str, read: str) -> None:
    """``read``: the running-config text, or (NX-OS, EOS) the ``| json`` answers."""
    if dialect in NO_MEMBER_PORTS:
        pytest.skip(NO_MEMBER_PORTS[dialect])
    sw, agg = f"{dialect}-leaf", AGGREGATE[dialect]
    members = port_names(dialect, 2)
    drv, double = double_driver(dialect, sw, (*members, agg), Q)
    drv._json = read == "json"  # the text: what the driver falls back to on its own
    t = _tenancy(dialect, sw, members, mode)
    desired = KIND.desired(t)

    # first lease: the aggregate takes the VLAN and both members (plain ports so far) join it
    plan = KIND.diff(desired, (drv.observe(),))
    assert [(c.after.port, c.after.bond) for c in plan.changes] == [(agg, ""), *((m, agg) for m in members)]
    drv.apply(plan.by_switch()[sw])
    got = drv.observe()
    assert [(_p(got, m).bond, _p(got, m).mode, _p(got, m).vlan) for m in members] == [(agg, PortMode.ACCESS, VlanId(2001))] * 2
    assert KIND.diff(desired, (got,)).empty
    assert [_joined(double, m, agg, mode) for m in members] == [True, True]

    # an operator pulls member 2 out: audit sees it, the plan puts it back
    _pull_out(double, members[1], agg)
    out = drv.observe()
    assert (_p(out, members[1]).bond, _p(out, members[0]).bond) == ("", agg)
    assert [(v.invariant, v.port) for v in KIND.audit(t, desired, (out,)) if v.invariant == OUT_ID] == [(OUT_ID, members[1])]
    plan = KIND.diff(desired, (out,))
    assert [(c.after.port, c.after.bond, c.after.bond_mode) for c in plan.changes] == [(members[1], agg, mode)]
    (verified,) = EthernetBackend({sw: drv}, verify_timeout=1.0).apply(plan)  # the read-back holds the membership
    assert [(p.port, p.bond) for p in verified.ports] == [(members[1], agg)]
    back = drv.observe()
    assert (_p(back, members[1]).bond, _p(back, members[1]).vlan) == (agg, VlanId(2001))
    assert _joined(double, members[1], agg, mode)
    assert KIND.diff(desired, (back,)).empty
    assert not [v for v in KIND.audit(t, desired, (back,)) if v.invariant == OUT_ID]


def _shut(double: CliDouble, member: str) -> None:
    """An operator shuts ``member`` down, leaving it in its aggregate."""
    if isinstance(double, (IosDouble, Os9Double)):
        double.blocks[member] = [x for x in double.blocks[member] if x not in ("shutdown", "no shutdown")] + ["shutdown"]
    elif isinstance(double, JunosDouble):
        double.active.append(("interfaces", member, "disable"))
    elif isinstance(double, NvueDouble):
        double.applied["interface"].setdefault(member, {})["link"] = {"state": "down"}
    else:
        assert isinstance(double, SonicDouble)
        double.db["PORT"][member]["admin_status"] = "down"


@pytest.mark.parametrize("dialect", DOUBLE_DIALECTS)
def test_a_member_shut_down_in_its_aggregate_is_brought_back_up(dialect: str) -> None:
    if dialect in NO_MEMBER_PORTS:
        pytest.skip(NO_MEMBER_PORTS[dialect])
    sw, agg = f"{dialect}-leaf", AGGREGATE[dialect]
    members = port_names(dialect, 2)
    drv, double = double_driver(dialect, sw, (*members, agg), Q)
    drv._json = False
    t = _tenancy(dialect, sw, members, "lacp")
    desired = KIND.desired(t)
    drv.apply(KIND.diff(desired, (drv.observe(),)).by_switch()[sw])

    _shut(double, members[0])
    down = drv.observe()
    assert (_p(down, members[0]).mode, _p(down, members[0]).bond) == (PortMode.SHUTDOWN, agg)
    assert [(v.invariant, v.port) for v in KIND.audit(t, desired, (down,)) if v.invariant.startswith("ETH-BOND")] == [
        ("ETH-BOND-MEMBER-DOWN", members[0])
    ]
    plan = KIND.diff(desired, (down,))
    assert [(c.after.port, c.after.mode, c.after.bond) for c in plan.changes] == [(members[0], PortMode.ACCESS, agg)]
    (verified,) = EthernetBackend({sw: drv}, verify_timeout=1.0).apply(plan)
    assert [(p.port, p.mode, p.vlan, p.bond) for p in verified.ports] == [(members[0], PortMode.ACCESS, VlanId(2001), agg)]
    assert KIND.diff(desired, (drv.observe(),)).empty
