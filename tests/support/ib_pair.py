"""The SM-pair tests' shared pieces: an ibsim fabric of ``hosts`` HCAs with its master OpenSM (on
the SM node) and the lab's standby (:class:`gpufabric.lab.smpair.SmPair`), stopped on exit; an
independent SMP sampler of one port's PKey table; the takeover after ``kill -9`` of the master
(by the standby's log, or by SMInfo); and a port's PKey table (a CA's or a switch's) read by ``smpquery``.
Used by tests/functional/test_ib_smhosts.py, test_ib_smpair_ipoib.py, test_ib_rogue_smpair.py,
test_lab_restart_sm_pair.py and the lab e2e
tests/e2e/test_lab_sm_pair.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpufabric.domain.errors import LabError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.ibnetdiscover import parse_ibnetdiscover
from gpufabric.fabrics.infiniband.parsers import parse_smpquery_pkeys
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.labib import SMINFO
from gpufabric.lab.netfile import SM_NODE, generate_netfile
from gpufabric.lab.smpair import SmPair, with_standby_node


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
