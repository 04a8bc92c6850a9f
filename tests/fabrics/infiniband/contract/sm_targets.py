"""Subnet managers the SM contract suite runs against: one factory per driver.

A factory is a context manager ``factory(run_dir) -> SmTarget`` yielding a driver, at least
``MIN_PORTS`` host port GUIDs on its fabric, and what its ``observe`` shows of the default
partition. To add a driver, add ONE line to ``SM_TARGETS``.

* ``memory``: :class:`support.memfabric.MemorySubnetManager` (OpenSM's semantics, in memory);
* ``ufm``: :class:`UfmDriver` against the local server speaking UFM's documented PKey REST
  subset (tests/support/ufm_server.py) — UFM's view: no default partition, a port in no
  PKey has no table;
* ``opensm``: :class:`OpenSMDriver` on a real OpenSM + ibsim (root; one fabric per module),
  every table read by SMP.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gpufabric.domain.values import DEFAULT_PKEY, Guid
from gpufabric.fabrics.infiniband.drivers.base import SubnetManagerDriver
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMConfig, OpenSMDriver
from gpufabric.fabrics.infiniband.drivers.ufm.driver import UfmDriver
from gpufabric.fabrics.infiniband.plan import expected_tables
from gpufabric.fabrics.infiniband.state import IbFabricState, PartitionLayout
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.netfile import SM_NODE, generate_netfile, hca_port_guid
from gpufabric.transport.secrets import Secret

from support.memfabric import MemorySubnetManager
from support.ufm_server import ufm_server

MIN_PORTS = 4
PKEYS = (0x0A01, 0x0A02, 0x0A03)  # inside every target's managed range


@dataclass(frozen=True)
class SmTarget:
    driver: SubnetManagerDriver
    guids: tuple[Guid, ...]  # host ports the suite may partition freely
    shows_default: bool  # observe() reports the default partition (SMP reads) or not (UFM's view)
    sm_guids: tuple[Guid, ...] = ()  # the SM node's ports (full members of the default partition)
    known_gaps: Mapping[str, str] = field(default_factory=dict)  # test name -> why it fails (strict xfail)

    def expected(self, layout: PartitionLayout) -> dict[Guid, frozenset[int]]:
        """The entries each of ``guids`` must show once ``layout`` is applied."""
        want = expected_tables(layout, self.guids)
        if self.shows_default:
            return want
        return {g: frozenset(e for e in keys if e & 0x7FFF != DEFAULT_PKEY) for g, keys in want.items()}

    def seen(self, state: IbFabricState) -> dict[Guid, frozenset[int]]:
        """The entries ``state`` shows for ``guids`` (no table: nothing)."""
        out: dict[Guid, frozenset[int]] = {}
        for g in self.guids:
            t = state.table(g)
            out[g] = frozenset(t.entries) if t is not None else frozenset()
        return out


SmTargetFactory = Callable[[Path], AbstractContextManager[SmTarget]]


@contextmanager
def memory_target(_run_dir: Path) -> Iterator[SmTarget]:
    sm = Guid(0x0002C90300FF0001)
    guids = tuple(Guid(0x0002C90300000A10 + i) for i in range(MIN_PORTS))
    yield SmTarget(MemorySubnetManager(ports=guids, trusted_sm_guids=[sm]), guids, shows_default=True, sm_guids=(sm,))


UFM_GAPS = {
    "test_the_fabric_plan_is_empty_after_apply": (
        "InfinibandKind's desired tables include the default partition (0x7fff limited), which UFM's view never "
        "shows and this driver cannot set: with UFM the IB plan never converges (the engine's post-apply check "
        "raises VerifyError, reconcile always reports drift)"
    ),
}


@contextmanager
def ufm_target(_run_dir: Path) -> Iterator[SmTarget]:
    guids = tuple(Guid(0x0002C90300000B10 + i) for i in range(MIN_PORTS))
    with ufm_server() as s:
        d = UfmDriver(s.url, username="admin", password=Secret("s3cret-test"), managed_pkeys="0x0a00-0x0aff",
                      verify=str(s.ca_file))  # fmt: skip
        try:
            yield SmTarget(d, guids, shows_default=False, known_gaps=UFM_GAPS)
        finally:
            d.close()


@contextmanager
def opensm_target(run_dir: Path) -> Iterator[SmTarget]:
    sm = hca_port_guid(0, 0)
    guids = tuple(hca_port_guid(n, 0) for n in range(1, MIN_PORTS + 1))
    fab = IbFabric(run_dir, f"gf-smc-{os.getpid()}", SM_NODE)
    try:
        fab.start_ibsim(generate_netfile(MIN_PORTS, 1))
        fab.start_opensm()
        opts: Mapping[str, object] = fab.driver_options(SM_NODE, [sm])
        cfg = dataclasses.replace(OpenSMConfig.from_options(opts), verify_timeout=10, sweep_timeout=30)
        drv = OpenSMDriver(cfg)
        drv.apply(PartitionLayout())  # from the safe default
        yield SmTarget(drv, guids, shows_default=True, sm_guids=(sm,))
    finally:
        fab.stop()


SM_TARGETS = [
    pytest.param(memory_target, id="memory"),
    pytest.param(ufm_target, id="ufm"),
    pytest.param(opensm_target, id="opensm", marks=pytest.mark.root),
]
