"""Switches the Ethernet contract suite runs against: one factory per driver.

A factory is a context manager ``factory(run_dir) -> EthernetTarget``: it brings up a
real switch (in ``run_dir``, with names carrying a unique prefix), yields a driver for it
plus the names of at least ``MIN_PORTS`` ports that exist on it, and tears everything
down on exit.

To add a driver to the suite, add ONE line to ``ETHERNET_TARGETS`` at the bottom, e.g.
``pytest.param(ssh_target, id="ssh"),`` (import the factory from your own module).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.drivers.base import EthernetSwitchDriver
from gpufabric.fabrics.ethernet.drivers.ovsdb.driver import OvsdbSwitchDriver
from gpufabric.lab.ovs import OvsServer

MIN_PORTS = 24
QUARANTINE_VLAN = VlanId(4000)  # targets configure their driver with this quarantine VLAN


@dataclass(frozen=True)
class EthernetTarget:
    driver: EthernetSwitchDriver
    ports: tuple[str, ...]  # existing ports the suite may configure freely
    known_gaps: Mapping[str, str] = field(default_factory=dict)  # test name -> why it fails (strict xfail)
    aggregates: tuple[str, ...] = ()  # existing aggregate interfaces (port-channel, ae, bond) to configure

    @property
    def switch(self) -> str:
        return self.driver.switch

    def missing(self, n: int = 0) -> str:
        """A port the switch does not have, named as it names its ports (a name its dialect would
        refuse never reaches it: the renderer checks it)."""
        return re.sub(r"\d+$", str(190 + n), self.ports[0])


EthernetTargetFactory = Callable[[Path], AbstractContextManager[EthernetTarget]]


@contextmanager
def ovsdb_target(run_dir: Path) -> Iterator[EthernetTarget]:
    """A private ovsdb-server + ovs-vswitchd, one netdev bridge with internal ports."""
    prefix = "gc" + secrets.token_hex(2)
    bridge = f"{prefix}br"
    ports = tuple(f"{prefix}p{i:02d}" for i in range(MIN_PORTS))
    ovs = OvsServer(run_dir / "ovs", netns=f"{prefix}-ovs")  # own netns: one netdev datapath per netns
    ovs.start()
    try:
        ovs.add_bridge(bridge, ports)
        with OvsdbSwitchDriver(bridge, ovs.remote, QUARANTINE_VLAN, timeout=10) as driver:
            yield EthernetTarget(driver, ports)
    finally:
        try:
            ovs.vsctl("--if-exists", "del-br", bridge)  # removes the bridge's tap devices
        finally:
            ovs.stop()


from fabrics.ethernet.contract.ethernet_doubles import DOUBLE_DIALECTS, memory_target, ssh_double_target  # noqa: E402
from fabrics.ethernet.contract.ssh_factory import ssh_target  # noqa: E402  (imports MIN_PORTS etc. from this module)

ETHERNET_TARGETS = [
    pytest.param(ovsdb_target, id="ovsdb", marks=pytest.mark.root),
    pytest.param(ssh_target, id="ssh-ovs", marks=pytest.mark.root),
    pytest.param(memory_target, id="memory"),
    *(pytest.param(ssh_double_target(d), id=f"double-{d}") for d in DOUBLE_DIALECTS),
]
