"""The vendor-CLI doubles (tests/support/ssh_double) speak the recorded output shapes: a double
loaded from a dialect's recorded running config prints text that the driver's parser reads
exactly as it reads the recording. And NVUE's pending revision, which outlives a failed batch:
the dialect drops it before each batch."""

from __future__ import annotations

import pytest

from gpufabric.domain.errors import ApplyError
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.drivers.ssh.dialects import DIALECTS, load_dialect
from gpufabric.fabrics.ethernet.readers.running_config import parse_running_config
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode

from support.ssh_double import AGGREGATE, OVS_BRIDGE, double_driver, port_names, sample

Q = 999  # the quarantine VLAN of the recordings


@pytest.mark.parametrize("dialect", DIALECTS)
def test_double_prints_what_the_recording_parses_to(dialect: str) -> None:
    drv, _ = double_driver(dialect, "leaf", (), Q)
    want = parse_running_config(
        load_dialect(dialect), sample(dialect), switch="leaf", quarantine=VlanId(Q),
        bridge=OVS_BRIDGE if dialect == "ovs" else None,
    )  # fmt: skip
    assert want.ports, "the recording has ports"
    assert drv.observe() == want


@pytest.mark.parametrize("dialect", DIALECTS)
def test_provisioned_ports_start_shut_in_quarantine(dialect: str) -> None:
    ports = port_names(dialect, 3)
    drv, double = double_driver(dialect, "leaf", ports, 4000)
    state = drv.observe()
    assert [state.port(p) for p in ports] == [EthernetPortConfig("leaf", p, PortMode.SHUTDOWN) for p in ports]
    assert double.sessions == 1


@pytest.mark.parametrize("dialect", ["nxos", "os10", "sonic"])
def test_the_double_is_not_transactional_where_the_vendor_is_not(dialect: str) -> None:
    """Sent straight to the double (past the driver's port check), a bad port in the middle of a
    batch leaves the lines before it applied: what the driver's up-front check is for."""
    ports = port_names(dialect, 2)
    drv, double = double_driver(dialect, "leaf", ports, 4000)
    lines = drv.render([EthernetPortConfig("leaf", ports[0], PortMode.ACCESS, VlanId(601))], drv.observe())
    missing = port_names(dialect, 3)[2]  # named as the switch names its ports, not provisioned
    bad = drv.render([EthernetPortConfig("leaf", missing, PortMode.ACCESS, VlanId(601))], drv.observe())
    script = [*lines[:-2], *bad] if drv.dialect.transport == "shell" else [*lines[:-1], *bad]
    r = double.shell(script) if drv.dialect.transport == "shell" else double.exec("\n".join(["set -ex", *script]))
    assert missing in r.out + r.err or "%" in r.out
    assert drv.observe().port(ports[0]) == EthernetPortConfig("leaf", ports[0], PortMode.ACCESS, VlanId(601))


def test_nvue_failed_batch_leaves_nothing_for_the_next_apply() -> None:
    """NVUE keeps a failed batch's staged ``nv set`` lines in the pending revision; the dialect's
    ``begin`` (``nv config detach``) drops them, so the next ``nv config apply`` does not apply them
    (was a strict xfail; NAPALM's Cumulus driver aborts a failed load the same way, ``net abort``)."""
    ports = port_names("nvue", 2)
    drv, _ = double_driver("nvue", "leaf", ports, 4000, unchecked=True)  # the switch refuses nosuchport0
    with pytest.raises(ApplyError, match="nosuchport0"):
        drv.apply([EthernetPortConfig("leaf", ports[0], PortMode.ACCESS, VlanId(601)),
                   EthernetPortConfig("leaf", "nosuchport0", PortMode.ACCESS, VlanId(601))])  # fmt: skip
    assert drv.observe().port(ports[0]) == EthernetPortConfig("leaf", ports[0], PortMode.SHUTDOWN)
    drv.apply([EthernetPortConfig("leaf", ports[1], PortMode.ACCESS, VlanId(700))])
    assert drv.observe().port(ports[0]) == EthernetPortConfig("leaf", ports[0], PortMode.SHUTDOWN)


@pytest.mark.parametrize(
    ("dialect", "lines", "error"),
    [
        ("sonic", ["sudo config portchannel member add PortChannel10 Ethernet24"],
         "Error: Ethernet24 Interface configured as VLAN_MEMBER under vlan : Vlan4000"),
        ("os9", ["configure terminal", "interface Port-channel 10", "channel-member TenGigabitEthernet 0/7", "end"],
         "% Error: Port is in Layer-2 mode TenGigabitEthernet 0/7."),
        ("os9", ["configure terminal", "interface TenGigabitEthernet 0/7", "port-channel-protocol LACP", "end"],
         "% Error: Port is in Layer-2 mode TenGigabitEthernet 0/7."),
    ],
)  # fmt: skip
def test_the_doubles_refuse_a_bond_member_that_keeps_its_own_vlans(dialect: str, lines: list[str], error: str) -> None:
    """Why the SONiC and OS9 membership lines leave the port's VLANs first (bond_leaves_vlans): the
    CLIs refuse a member with VLAN (or switchport) configuration of its own."""
    _, double = double_driver(dialect, f"{dialect}-leaf", (*port_names(dialect, 1), AGGREGATE[dialect]), 4000)
    r = double.exec("\n".join(lines)) if dialect == "sonic" else double.shell(lines)
    assert error in (r.err if dialect == "sonic" else r.out)
