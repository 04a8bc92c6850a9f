"""The lab's Ethernet on a configured quarantine VLAN, for real (a private OVS in its own netns).

``gpufabric lab up`` hands config.yaml's ``ethernet.quarantine_vlan`` to the lab; the lab used to
park every new port on VLAN 4000 and keep 4000 off the uplinks whatever the configuration said,
so a site configured with another quarantine VLAN had its fresh ports read back as tenant ports.
Two nodes on one leaf, unique prefix, everything removed afterwards.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.drivers.ovsdb.driver import OvsdbSwitchDriver
from gpufabric.fabrics.ethernet.state import PortMode
from gpufabric.lab.netns import EthPlan, ensure_ethernet, list_netns, plan_ethernet, remove_ethernet
from gpufabric.lab.ovs import OvsServer

pytestmark = pytest.mark.root

QV = 4001  # configured quarantine VLAN (not the default)
POOL = (3999, 4002)  # a tenant pool around it: the uplinks must carry all of it but the quarantine VLAN


@pytest.fixture(scope="module")
def lab_eth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OvsServer, EthPlan]]:
    prefix = "gq" + secrets.token_hex(2)
    ovs = OvsServer(Path(tmp_path_factory.mktemp("qvlan")) / "ovs", netns=f"{prefix}-sw")
    plan = dataclasses.replace(plan_ethernet(prefix, ["n1", "n2"], quarantine_vlan=QV), uplink_vlans=POOL)
    try:
        ovs.start()
        ensure_ethernet(ovs, plan)
        yield ovs, plan
    finally:
        try:
            remove_ethernet(ovs, [plan.spine, *plan.leaves], [p.ovs_port for p in plan.ports], list(plan.netns))
        finally:
            ovs.stop()
        left = {ns for ns in list_netns() if ns.startswith(prefix)}
        assert not left, f"namespaces left behind: {left}"


def test_new_ports_start_on_the_configured_quarantine_vlan(lab_eth: tuple[OvsServer, EthPlan]) -> None:
    ovs, plan = lab_eth
    for p in plan.ports:
        assert ovs.vsctl("get", "port", p.ovs_port, "tag").strip() == str(QV)
        assert ovs.vsctl("get", "port", p.ovs_port, "vlan_mode").strip() == "access"
        assert ovs.vsctl("get", "port", p.ovs_port, "protected").strip() == "true"


def test_uplinks_carry_the_pool_but_not_the_configured_quarantine_vlan(lab_eth: tuple[OvsServer, EthPlan]) -> None:
    ovs, plan = lab_eth
    up, down = plan.patch_ports(plan.leaves[0])
    for port in (up, down):
        trunks = ovs.vsctl("get", "port", port, "trunks").strip()
        assert trunks == "[3999, 4000, 4002]", trunks


def test_a_driver_on_the_configured_vlan_reads_the_fresh_ports_as_shut(lab_eth: tuple[OvsServer, EthPlan]) -> None:
    ovs, plan = lab_eth
    with OvsdbSwitchDriver(plan.leaves[0], ovs.remote, VlanId(QV), timeout=10) as driver:
        state = driver.observe()
    modes = {c.port: c.mode for c in state.ports}
    assert {p.ovs_port: modes.get(p.ovs_port) for p in plan.ports} == {p.ovs_port: PortMode.SHUTDOWN for p in plan.ports}
