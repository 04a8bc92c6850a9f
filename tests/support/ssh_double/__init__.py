"""A replaying SSH double of eight switch CLIs, so that :class:`SshSwitchDriver` runs the
Ethernet contract in every dialect (NX-OS, EOS, Junos, OS10, OS9, SONiC, NVUE, Linux+OVS) without
a switch, a network or root.

THIS IS A DOUBLE OF THE VENDORS' CLIs, NOT THE VENDORS. Each :class:`~base.CliDouble` keeps one
switch's configuration in that vendor's own model, applies the config lines the driver renders
to it, and answers the dialect's read commands in that vendor's output shape, starting from the
recorded samples in tests/fixtures/ssh/<dialect>/. Where a vendor is not transactional (IOS-like
CLIs run line by line; SONiC commands act one by one; Junos commits the lines that did not
fail; NVUE keeps a pending revision), the double is not either: that is what it is for.

:class:`ReplayConnection` replaces the driver's :class:`SshConnection` (same ``run_exec`` /
``run_shell`` interface, the SSH transport itself is what tests/fabrics/ethernet/functional/test_ssh_ovs.py
covers for real).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gpufabric.fabrics.ethernet.drivers.ssh.connection import CommandResult
from gpufabric.fabrics.ethernet.drivers.ssh.dialects import DIALECTS, load_dialect
from gpufabric.fabrics.ethernet.drivers.ssh.driver import SshSwitchDriver

from support.ssh_double.base import CliDouble
from support.ssh_double.ios import IosDouble
from support.ssh_double.jsoncli import NvueDouble, SonicDouble
from support.ssh_double.junos import JunosDouble
from support.ssh_double.os9 import Os9Double
from support.ssh_double.ovs import OvsDouble

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ssh"
OVS_BRIDGE = "br0"


def port_names(dialect: str, n: int) -> tuple[str, ...]:
    """``n`` provisioned port names in the dialect's style, none in the recorded sample."""
    style = {
        "nxos": "Ethernet1/{}", "eos": "Ethernet{}", "os10": "ethernet1/1/{}", "os9": "TenGigabitEthernet0/{}", "junos": "ge-0/0/{}",
        "nvue": "swp{}", "ovs": "p{:02d}",
    }  # fmt: skip
    if dialect == "sonic":
        return tuple(f"Ethernet{24 + 4 * i}" for i in range(n))
    first = 11 if dialect == "nxos" else 7
    return tuple(style[dialect].format(first + i) for i in range(n))


AGGREGATE = {
    "nxos": "port-channel10", "eos": "Port-Channel10", "os10": "port-channel10", "os9": "Port-channel10", "junos": "ae10",
    "nvue": "bond10", "sonic": "PortChannel10", "ovs": "bond10",
}  # fmt: skip
"""One aggregate interface (port-channel / ae / bond) per dialect, named as the vendor names it."""


def sample(dialect: str) -> str:
    d = FIXTURES / dialect
    return next(iter(sorted(d.glob("running-config.*")))).read_text()


def make_double(dialect: str, ports: tuple[str, ...], quarantine: int) -> CliDouble:
    """The double of ``dialect``'s switch: the recorded sample plus ``ports`` (shut, in quarantine)."""
    text = sample(dialect)
    if dialect in ("nxos", "eos", "os10"):
        return IosDouble(dialect, text, ports, quarantine)
    if dialect == "os9":
        return Os9Double(text, ports, quarantine)
    if dialect == "junos":
        return JunosDouble(text, ports, quarantine)
    if dialect == "sonic":
        return SonicDouble(text, ports, quarantine)
    if dialect == "nvue":
        return NvueDouble(text, ports, quarantine)
    if dialect == "ovs":
        return OvsDouble(text, OVS_BRIDGE, ports, quarantine)
    raise ValueError(f"no double for dialect {dialect} (known: {', '.join(DIALECTS)})")


class ReplayConnection:
    """Stands in for :class:`SshConnection`: each session is replayed against the double."""

    def __init__(self, double: CliDouble) -> None:
        self.double = double
        self.connects = 1
        self.sent: list[str] = []

    def run_exec(self, script: str) -> CommandResult:
        self.sent.append(script)
        r = self.double.exec(script)
        return CommandResult(script, r.out, r.err, r.status)

    def run_shell(self, lines: list[str] | tuple[str, ...]) -> CommandResult:
        script = "".join(line + "\n" for line in lines)
        self.sent.append(script)
        r = self.double.shell(lines)
        return CommandResult(script, r.out, r.err, r.status)

    def close(self) -> None:
        pass


def double_driver(dialect: str, switch: str, ports: tuple[str, ...], quarantine: int,
                  unchecked: bool = False) -> tuple[SshSwitchDriver, CliDouble]:  # fmt: skip
    """An :class:`SshSwitchDriver` in ``dialect`` whose connection is replayed against a double;
    ``unchecked``: its renderer does not check port names with the dialect's naming, so a name
    the switch refuses reaches it (a test of what the switch does with a failed batch)."""
    double = make_double(dialect, ports, quarantine)
    drv = SshSwitchDriver(
        host="192.0.2.1",  # TEST-NET-1: never contacted, the connection is replaced below
        username="admin",
        key_filename="/nonexistent",
        dialect=dataclasses.replace(load_dialect(dialect), port_naming=None) if unchecked else dialect,
        switch=switch,
        quarantine_vlan=quarantine,
        bridge=OVS_BRIDGE if dialect == "ovs" else None,
        insecure=True,  # no SSH at all: the connection is the double (no host key to check)
    )
    drv.connection = ReplayConnection(double)  # type: ignore[assignment]
    return drv, double
