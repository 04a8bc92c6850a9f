"""Batch SMP reader vs smpquery on the same real ibsim + OpenSM 3.3.23 fabric.

Fabric: 4 GPU nodes x 2 HCAs + the SM node, tenant partitions applied (full, limited,
ipoib, and one port in 40 partitions so its table spans both 32-entry blocks). Every
CA port's PKey table / PortInfo / NodeInfo, switch port 0 and port 1 tables, the SM's
SMInfo and an absent LID are read through both readers and must be equal.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Iterator

import pytest

from gpufabric.domain.errors import GpufabricError
from gpufabric.domain.values import Membership, PKey
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMConfig, OpenSMDriver
from gpufabric.fabrics.infiniband.drivers.opensm.smpread import BatchSmpReader, DiagSmpReader, Op, SmpQuery
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import ca_ports
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember
from gpufabric.fabrics.infiniband.state.partitions import check_layout, entries_by_port
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.netfile import SM_NODE, generate_netfile, hca_port_guid

pytestmark = pytest.mark.root

SM = hca_port_guid(0, 0)
G = [hca_port_guid(n, h) for n in range(1, 5) for h in (0, 1)]
LAYOUT = PartitionLayout(
    (
        Partition("tenant-a", PKey(0x0A01), (PartitionMember(G[0]), PartitionMember(G[1], Membership.LIMITED))),
        Partition("tenant-b", PKey(0x0B01), tuple(PartitionMember(g) for g in G[2:6]), ipoib=True),
        *(Partition(f"many-{i}", PKey(0x1000 + i), (PartitionMember(G[6]),)) for i in range(40)),
    )
)


def driver(fab: IbFabric, reader: str) -> OpenSMDriver:
    return OpenSMDriver(
        dataclasses.replace(
            OpenSMConfig.from_options(fab.driver_options(SM_NODE, [SM])),
            verify_timeout=10,
            sweep_timeout=30,
            reader=reader,
        )
    )


@pytest.fixture(scope="module")
def fab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IbFabric]:
    f = IbFabric(tmp_path_factory.mktemp("ibsmpb"), f"gf-t-smpb-{os.getpid()}", SM_NODE)
    try:
        f.start_ibsim(generate_netfile(4, 2))
        f.start_opensm()
        drv = driver(f, "batch")
        drv.apply(LAYOUT)
        drv.close()
        yield f
    finally:
        f.stop()


def test_both_readers_read_identical_values_everywhere(fab: IbFabric) -> None:
    drv, fallback = driver(fab, "batch"), driver(fab, "smpquery")
    assert isinstance(drv.reader, BatchSmpReader) and isinstance(fallback.reader, DiagSmpReader)
    topo = drv.diag.discover()
    ports = sorted(ca_ports(topo).values(), key=lambda p: p.guid)
    switches = sorted(n.lid for n in topo.switches() if n.lid)
    ops: tuple[Op, ...] = ("pkeys", "portinfo", "nodeinfo")
    queries = [SmpQuery(op, p.lid, p.port_num) for p in ports for op in ops]
    queries += [SmpQuery("pkeys", lid, port) for lid in switches for port in (0, 1)]
    queries += [SmpQuery("portinfo", switches[0], 1), SmpQuery("nodeinfo", switches[0])]
    queries += [SmpQuery("sminfo", next(p.lid for p in ports if p.guid == SM)), SmpQuery("pkeys", 4000, 1)]
    batch, smpquery = drv.reader.read(queries), fallback.reader.read(queries)
    assert len(batch) == len(smpquery) == len(queries) == 3 * 9 + 2 * len(switches) + 4
    for q, a, b in zip(queries, batch, smpquery, strict=True):
        if isinstance(b, GpufabricError):
            assert isinstance(a, GpufabricError), q
        else:
            assert a == b, q
    assert [q for q, a in zip(queries, batch, strict=True) if isinstance(a, GpufabricError)] == [queries[-1]]
    # and the values are the layout's (not just equal to each other)
    want = entries_by_port(check_layout(LAYOUT, [SM]))
    tables = {p.guid: batch[3 * i] for i, p in enumerate(ports)}
    for g in G:
        assert frozenset(getattr(tables[g], "entries", ())) == want.get(g, {0x7FFF}), g
    assert len(getattr(tables[G[6]], "entries", ())) == 41  # 0x7fff + 40: both 32-entry blocks
    drv.close()


def test_observe_is_identical_with_both_readers(fab: IbFabric) -> None:
    drv = driver(fab, "batch")
    batch, smpquery = drv.observe(), driver(fab, "smpquery").observe()
    assert batch == smpquery
    assert batch.master_guid == SM
    assert [(s.guid, s.description, s.port_guid) for s in batch.sms] == [(SM, "sm-01 mlx5_0", SM)]
    assert {t.port_guid for t in batch.tables if 0x0B01 in t.full_keys()} == set(G[2:6])
    drv.close()


def test_apply_and_verify_through_one_reader_process(fab: IbFabric) -> None:
    drv = driver(fab, "batch")
    assert isinstance(drv.reader, BatchSmpReader)
    moved = PartitionLayout(
        (
            LAYOUT.partitions[0],
            Partition("tenant-b", PKey(0x0B01), tuple(PartitionMember(g) for g in G[2:5]), ipoib=True),
            *LAYOUT.partitions[2:],
        )
    )
    try:
        drv.apply(moved)  # G[5] out of tenant-b: HUP, verified by the batch reader
        assert drv.last_report.reloads == 1
        assert {t.port_guid: frozenset(t.entries) for t in drv.tables([G[4], G[5]])} == {
            G[4]: {0x7FFF, 0x8B01},
            G[5]: {0x7FFF},
        }
        drv.observe()
        assert drv.reader.starts == 1
    finally:
        drv.apply(LAYOUT)
        drv.close()


def test_idle_reader_exits_by_itself_and_frees_its_slot(fab: IbFabric) -> None:
    drv = driver(fab, "batch")
    reader = BatchSmpReader(drv.diag.env, cwd=fab.scratch, idle_exit=0.3)
    q = [SmpQuery("portinfo", 1, 1)]
    first = reader.read(q)
    pid = reader.pid
    assert pid is not None
    deadline = time.monotonic() + 20
    while reader.pid is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert reader.pid is None  # exited on its own (closed its port: umad2sim removed its sys dir)
    assert not (fab.scratch / f"sys-{pid}").exists()
    assert reader.read(q) == first
    assert reader.starts == 2
    reader.close()


# last: a SIGKILLed umad client keeps its ibsim client slot until ibsim restarts
def test_killed_reader_is_restarted_and_close_cleans_up(fab: IbFabric) -> None:
    drv = driver(fab, "batch")
    reader = drv.reader
    assert isinstance(reader, BatchSmpReader)
    before = drv.observe()
    pid = reader.pid
    assert pid is not None and (fab.scratch / f"sys-{pid}").is_dir()
    os.kill(pid, signal.SIGKILL)  # the child this reader started
    assert drv.observe() == before
    assert reader.starts == 2
    second = reader.pid
    drv.close()
    assert reader.pid is None
    assert not (fab.scratch / f"sys-{second}").exists()  # umad2sim cleaned up on EOF
