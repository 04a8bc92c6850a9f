"""OpenSMDriver keeps the file it last wrote parsed (ibsim + OpenSM): a move neither parses
partitions.conf again nor checks its layout twice, reads back only the moved port, and a
file edited by someone else is parsed as before (its changes are what gets verified)."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gpufabric.domain.values import Guid, PKey
from gpufabric.fabrics.infiniband.drivers.opensm import driver as opensm
from gpufabric.fabrics.infiniband.drivers.opensm import knownfile
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMConfig, OpenSMDriver
from gpufabric.fabrics.infiniband.drivers.opensm.files import atomic_write
from gpufabric.fabrics.infiniband.readers.diags import parse_opensm_log
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember
from gpufabric.fabrics.infiniband.state.partitions import render_partitions_conf
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.netfile import SM_NODE, generate_netfile, hca_port_guid

pytestmark = pytest.mark.root

SM = hca_port_guid(0, 0)
G = [hca_port_guid(n, 0) for n in range(1, 5)]


@pytest.fixture(scope="module")
def fab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IbFabric]:
    f = IbFabric(tmp_path_factory.mktemp("ibknown"), f"gf-t-known-{os.getpid()}", SM_NODE)
    try:
        f.start_ibsim(generate_netfile(4, 1))
        f.start_opensm()
        yield f
    finally:
        f.stop()


@pytest.fixture
def drv(fab: IbFabric) -> Iterator[OpenSMDriver]:
    cfg = OpenSMConfig.from_options(fab.driver_options(SM_NODE, [SM]))
    d = OpenSMDriver(dataclasses.replace(cfg, verify_timeout=10, sweep_timeout=30))
    try:
        yield d
    finally:
        d.close()


def tenants(a: list[Guid], b: list[Guid]) -> PartitionLayout:
    return PartitionLayout(
        (
            Partition("tenant-a", PKey(0x0A01), tuple(PartitionMember(g) for g in a)),
            Partition("tenant-b", PKey(0x0B01), tuple(PartitionMember(g) for g in b)),
        )
    )


def counting(monkeypatch: pytest.MonkeyPatch, module: object, name: str, calls: list[str]) -> None:
    real: Callable[..., Any] | None = getattr(module, name, None)
    if real is None:
        return

    def counted(*a: Any, **k: Any) -> Any:
        calls.append(name)
        assert real is not None
        return real(*a, **k)

    monkeypatch.setattr(module, name, counted)


def tables(drv: OpenSMDriver) -> dict[Guid, frozenset[int]]:
    return {t.port_guid: frozenset(t.entries) for t in drv.tables(G)}


def test_a_move_parses_nothing_and_checks_each_layout_once(drv: OpenSMDriver, monkeypatch: pytest.MonkeyPatch) -> None:
    drv.apply(tenants(G[:2], G[2:]))
    parses: list[str] = []
    checks: list[str] = []
    for module in (opensm, knownfile):
        counting(monkeypatch, module, "parse_partitions_conf", parses)
    counting(monkeypatch, opensm, "check_layout", checks)
    drv.apply(tenants(G[:1], G[2:]))  # step 1: G[1] out of tenant-a
    assert drv.last_report.ports_checked == 1 and drv.last_report.reloads == 1
    drv.apply(tenants(G[:1], G[1:]))  # step 2: into tenant-b
    assert drv.last_report.ports_checked == 1 and drv.last_report.reloads == 1
    assert parses == []  # the running file and its last-good copy are the ones this driver wrote
    assert len(checks) == 2  # one check_layout per apply (render's), not two
    assert tables(drv) == {G[0]: {0x7FFF, 0x8A01}, G[1]: {0x7FFF, 0x8B01}, G[2]: {0x7FFF, 0x8B01}, G[3]: {0x7FFF, 0x8B01}}


def test_a_file_edited_by_hand_is_parsed_and_its_changes_verified(
    fab: IbFabric, drv: OpenSMDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    drv.apply(tenants(G[:2], G[2:]))
    # someone else takes G[3] out of tenant-b behind the driver's back (and OpenSM applies it)
    offset = fab.opensm_log.stat().st_size
    atomic_write(fab.partitions_conf, render_partitions_conf(tenants(G[:2], G[2:3]), [SM]))
    drv.reload()
    deadline = time.monotonic() + 30
    while not parse_opensm_log(fab.log_since(offset)).subnet_up and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tables(drv)[G[3]] == {0x7FFF}
    parses: list[str] = []
    for module in (opensm, knownfile):
        counting(monkeypatch, module, "parse_partitions_conf", parses)
    drv.apply(tenants(G[:1], G[2:]))  # against the file that runs: G[1] out, G[3] back in
    assert parses  # the edited file was read as it is, not taken for the one the driver wrote
    assert drv.last_report.ports_checked == 2
    assert tables(drv) == {G[0]: {0x7FFF, 0x8A01}, G[1]: {0x7FFF}, G[2]: {0x7FFF, 0x8B01}, G[3]: {0x7FFF, 0x8B01}}
