"""A bond member pulled out of its port-channel goes back in (issue 21): through the SSH driver
against the vendor-CLI doubles of the dialects that render membership (EOS, NX-OS, OS10), the plan
puts the member back, the apply runs on the double, the read-back shows the member in its
channel with the channel's VLANs, and the next plan is empty."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import Fabric, Lease, Network, Segment
from gpufabric.domain.state import EthernetPortConfig, PortMode, SwitchState
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.bonds import OUT_ID
from gpufabric.fabrics.ethernet.dialects import load_dialect
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.workflow.inventory import inventory_from_dict

from support.ssh_double import AGGREGATE, double_driver, port_names
from support.ssh_double.ios import IosDouble

KIND = EthernetKind()
Q = 4000
T0 = datetime(2026, 1, 1, tzinfo=UTC)
RENDERS_MEMBERSHIP = ("eos", "nxos", "os10")


def _tenancy(dialect: str, sw: str, members: tuple[str, ...], mode: str) -> Tenancy:
    eth: list[dict[str, Any]] = [
        {"name": f"eth{i}", "switch": sw, "switch_port": m, "bond": AGGREGATE[dialect], "bond_mode": mode}
        for i, m in enumerate(members)
    ]
    nodes = inventory_from_dict({"version": 1, "nodes": [{"name": "gpu-b01", "ethernet": eth}]}).nodes
    net = Network("n1", "acme", (Segment(Fabric.ETHERNET, 2001, vlan=VlanId(2001)),))
    return Tenancy(nodes, {"gpu-b01": Lease("acme", "gpu-b01", T0, networks=("n1",))}, {("acme", "n1"): net},
                   settings={"quarantine_vlan": Q})  # fmt: skip


def _p(st: SwitchState, name: str) -> EthernetPortConfig:
    got = st.port(name)
    assert got is not None, f"{name} not read"
    return got


@pytest.mark.parametrize(("mode", "word"), [("lacp", "active"), ("active-backup", "on")])
@pytest.mark.parametrize("dialect", RENDERS_MEMBERSHIP)
@pytest.mark.parametrize("read", ["json", "text"])
def test_member_pulled_out_goes_back_and_the_plan_converges(dialect: str, mode: str, word: str, read: str) -> None:
    """``read``: the ``| json`` answers, or the running-config text (software without them)."""
    sw, agg = f"{dialect}-leaf", AGGREGATE[dialect]
    members = port_names(dialect, 2)
    if read == "json" and not load_dialect(dialect).json_parser:
        pytest.skip(f"{dialect} has no structured read")
    drv, double = double_driver(dialect, sw, (*members, agg), Q)
    assert isinstance(double, IosDouble)
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
    assert f"channel-group 10 mode {word}" in double.blocks[members[0]]

    # an operator pulls member 2 out (no channel-group): audit sees it, the plan puts it back
    double.blocks[members[1]] = [x for x in double.blocks[members[1]] if not x.startswith("channel-group")]
    out = drv.observe()
    assert (_p(out, members[1]).bond, _p(out, members[0]).bond) == ("", agg)
    assert [(v.invariant, v.port) for v in KIND.audit(t, desired, (out,)) if v.invariant == OUT_ID] == [(OUT_ID, members[1])]
    plan = KIND.diff(desired, (out,))
    assert [(c.after.port, c.after.bond, c.after.bond_mode) for c in plan.changes] == [(members[1], agg, mode)]
    drv.apply(plan.by_switch()[sw])
    back = drv.observe()
    assert (_p(back, members[1]).bond, _p(back, members[1]).vlan) == (agg, VlanId(2001))
    assert KIND.diff(desired, (back,)).empty
    assert not [v for v in KIND.audit(t, desired, (back,)) if v.invariant == OUT_ID]
