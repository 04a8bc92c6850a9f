"""The SM-pair tests' shared pieces: an ibsim fabric of ``hosts`` HCAs with its master OpenSM (on
the SM node) and the lab's standby (:class:`gpufabric.lab.smpair.SmPair`), stopped on exit; an
independent SMP sampler of one port's PKey table; the takeover after ``kill -9`` of the master
(by the standby's log, or by SMInfo); a port's PKey table (a CA's or a switch's) read by ``smpquery``;
and the OpenSM driver on the pair's own options (:func:`pair_driver`), or that driver with a layout
applied and the master checked (:func:`applied`: the opening of most pair tests).
Used by tests/fabrics/infiniband/functional/test_ib_smhosts.py, test_ib_smpair_ipoib.py, test_ib_rogue_smpair.py,
test_lab_restart_sm_pair.py and the lab e2e
tests/e2e/test_lab_sm_pair.py."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpufabric.domain.errors import LabError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMConfig, OpenSMDriver
from gpufabric.fabrics.infiniband.readers.diags import parse_smpquery_pkeys
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import parse_ibnetdiscover
from gpufabric.fabrics.infiniband.state import PartitionLayout
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.labib import SMINFO
from gpufabric.lab.netfile import SM_NODE, generate_netfile, hca_port_guid
from gpufabric.lab.smpair import SmPair, with_standby_node

MASTER_GUID = hca_port_guid(0, 0)  # sm-01's port in the generated net file


@contextmanager
def sm_pair_lab(root: Path, prefix: str, hosts: int = 4) -> Iterator[tuple[IbFabric, SmPair]]:
    fab = IbFabric(root / "ib", prefix, SM_NODE)
    pair = SmPair(fab, root / "pair")
    try:
        fab.start_ibsim(with_standby_node(generate_netfile(hosts, 1)))
        fab.start_opensm()
        pair.start()
        yield fab, pair
    finally:
        pair.stop()
        fab.stop()


def pair_driver(
    pair: SmPair, verify_timeout: float = 15, reads: list[tuple[str, str]] | None = None, **extra: object
) -> OpenSMDriver:
    """The OpenSM driver on the pair's own options (:meth:`SmPair.driver_options`: both SM hosts
    over SSH, each with its ``sa_dump``) and ``extra``; ``reads`` records (SM host, script) of
    every SSH command the driver sends."""
    cfg = OpenSMConfig.from_options({**pair.driver_options(SM_NODE, MASTER_GUID), **extra})
    drv = OpenSMDriver(dataclasses.replace(cfg, verify_timeout=verify_timeout, sweep_timeout=30))
    if reads is not None:
        for h in drv.fleet.hosts:
            run = h.ssh.run  # type: ignore[attr-defined]
            h.ssh.run = lambda s, i=b"", run=run, n=h.name: (reads.append((n, s)), run(s, i))[1]  # type: ignore[attr-defined]
    return drv


@contextmanager
def applied(
    pair: SmPair, layout: PartitionLayout, master: str = "sm-01", reads: list[tuple[str, str]] | None = None
) -> Iterator[OpenSMDriver]:
    """:func:`pair_driver` with ``layout`` applied and ``master`` the SM host SMInfo names master
    (the driver's own look-up); closed on exit."""
    drv = pair_driver(pair, reads=reads)
    try:
        drv.apply(layout)
        assert drv.master().name == master, f"SMInfo names {drv.master().name} master, not {master}"
        yield drv
    finally:
        drv.close()


class Sampler(threading.Thread):
    """An independent SMP reader: ``smpquery pkeys LID PORT`` (its own process each time, as
    ``sim_host``'s HCA), every sample kept with its time, until stopped."""

    def __init__(self, fab: IbFabric, lid: int, port: int = 1, sim_host: str = "gpu-a04 mlx5_0") -> None:
        super().__init__(daemon=True)
        self.fab, self.lid, self.port, self.sim_host = fab, lid, port, sim_host
        self.samples: list[tuple[float, frozenset[int]]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            out = self.fab.run_tool(["smpquery", "pkeys", str(self.lid), str(self.port)], sim_host=self.sim_host)
            self.samples.append((time.monotonic(), frozenset(parse_smpquery_pkeys(out).entries)))

    def stop(self) -> list[tuple[float, frozenset[int]]]:
        self.halt.set()
        self.join(30)
        return self.samples


def take_over(pair: SmPair) -> float:
    """kill -9 the master; seconds until the standby logs SUBNET UP as the new master."""
    offset = pair.log_offset()
    t0 = time.monotonic()
    pair.kill_master()
    while not (pair.log_has(offset, "Entering MASTER state") and pair.log_has(offset, "SUBNET UP")):
        assert time.monotonic() - t0 < 60, "the standby did not take over"
        time.sleep(0.02)
    return time.monotonic() - t0


def sminfo_master(fab: IbFabric, sim_host: str = SM_NODE) -> tuple[Guid | None, str]:
    """(GUID, state) of the SM that ``sminfo`` (as ``sim_host``'s HCA) finds; (None, error) when none answers."""
    try:
        out = fab.run_tool(["sminfo"], sim_host=sim_host, timeout=5)
    except LabError as e:
        return None, e.message
    m = SMINFO.search(out)
    return (Guid.parse(m.group(1)), m.group(2)) if m else (None, out.strip())


def wait_sminfo_master(fab: IbFabric, guid: Guid, since: float, timeout: float = 30) -> float:
    """Poll SMInfo until ``guid`` is SMINFO_MASTER; seconds from ``since`` (time.monotonic)."""
    while sminfo_master(fab) != (guid, "SMINFO_MASTER"):
        assert time.monotonic() - since < timeout, f"SMInfo does not name {guid} master: {sminfo_master(fab)}"
        time.sleep(0.05)
    return time.monotonic() - since


def port_lids(fab: IbFabric, sim_host: str = SM_NODE) -> dict[Guid, int]:
    """Port GUID -> LID of every switch (its port 0) and CA port, from ``ibnetdiscover -p``."""
    topo = parse_ibnetdiscover(fab.run_tool(["ibnetdiscover", "-p"], sim_host=sim_host))
    out = {s.port_guid: s.lid for s in topo.switches() if s.port_guid is not None and s.lid is not None}
    out.update({p.port_guid: p.lid for ca in topo.cas() for p in ca.ports if p.port_guid and p.lid is not None})
    return out


def port_pkeys(fab: IbFabric, lid: int, port: int, sim_host: str = SM_NODE) -> frozenset[int]:
    """The PKey table of port ``port`` of ``lid`` by SMP (``smpquery pkeys``): a CA port's, or a
    switch port's (what OpenSM programs there for partition enforcement)."""
    out = fab.run_tool(["smpquery", "pkeys", str(lid), str(port)], sim_host=sim_host)
    return frozenset(parse_smpquery_pkeys(out).entries)
