"""OpenSMDriver.observe() reuses the ibnetdiscover topology (ibsim + OpenSM): it rediscovers
after TOPOLOGY_TTL, or at once when a cached port cannot be read (its LID moved)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator

import pytest

from gpufabric.fabrics.infiniband.drivers.opensm import driver as opensm
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMConfig, OpenSMDriver
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import IbTopology
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.netfile import SM_NODE, generate_netfile, hca_port_guid

pytestmark = pytest.mark.root

SM = hca_port_guid(0, 0)
G = [hca_port_guid(n, 0) for n in range(1, 4)]


class CountingDriver(OpenSMDriver):
    """The real driver; counts the ibnetdiscover runs it makes."""

    discovers = 0

    def __init__(self, cfg: OpenSMConfig) -> None:
        super().__init__(cfg)
        real = self.diag.discover

        def discover() -> IbTopology:
            self.discovers += 1
            return real()

        self.diag.discover = discover  # type: ignore[method-assign]


@pytest.fixture(scope="module")
def fab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IbFabric]:
    f = IbFabric(tmp_path_factory.mktemp("ibcache"), f"gf-t-topo-{os.getpid()}", SM_NODE)
    try:
        f.start_ibsim(generate_netfile(3, 1))
        f.start_opensm()
        yield f
    finally:
        f.stop()


@pytest.fixture
def drv(fab: IbFabric) -> Iterator[CountingDriver]:
    cfg = dataclasses.replace(OpenSMConfig.from_options(fab.driver_options(SM_NODE, [SM])), verify_timeout=10)
    d = CountingDriver(cfg)
    try:
        yield d
    finally:
        d.close()


def test_observe_reuses_the_topology(drv: CountingDriver) -> None:
    first = drv.observe()
    assert {t.port_guid for t in first.tables} >= {SM, *G}
    assert drv.observe() == first
    assert drv.discovers == 1


def test_topology_older_than_ttl_is_rediscovered(drv: CountingDriver, monkeypatch: pytest.MonkeyPatch) -> None:
    drv.observe()
    monkeypatch.setattr(opensm, "TOPOLOGY_TTL", 0.0)
    drv.observe()
    assert drv.discovers == 2


def test_unreadable_cached_port_rediscovers(drv: CountingDriver) -> None:
    good = drv.observe()
    port = drv._ports[G[0]]
    drv._ports[G[0]] = dataclasses.replace(port, lid=port.lid + 500)  # as if its LID had moved
    assert drv.observe() == good
    assert drv.discovers == 2
    assert drv._ports[G[0]].lid == port.lid
