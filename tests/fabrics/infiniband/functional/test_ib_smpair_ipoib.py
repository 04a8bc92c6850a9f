"""The IPoIB group check on the lab's real OpenSM master/standby pair (ibsim), configured only
from :meth:`SmPair.driver_options` (the ``infiniband.options`` a site's fabrics.yaml holds).

Issue 20: the pair's ``sm_hosts`` had no ``sa_dump``, so with IPoIB leases the check of the
broadcast groups ran on no SM at all. Here each SM host carries its own ``opensm-sa.dump``; the
check reads the master's over SSH, and after ``kill -9`` of the master the new master's. A
missing or stale dump on the master is a VerifyError naming the SM host and the PKeys (a
finding), not a crash. Prints the seconds from the kill to the check passing on the new master.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufabric.domain.errors import VerifyError
from gpufabric.domain.values import PKey
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMDriver
from gpufabric.fabrics.infiniband.drivers.opensm.hosts import read_script
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember
from gpufabric.fabrics.infiniband.state.ipoib import McGroup, parse_sa_dump_groups
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.netfile import SM_NODE, hca_port_guid
from gpufabric.lab.smpair import STANDBY_PORT_GUID, SmPair

from support.ib_pair import applied, sm_pair_lab, take_over

pytestmark = pytest.mark.root

SM = hca_port_guid(0, 0)
G = [hca_port_guid(n, 0) for n in range(1, 5)]
BCAST_A01 = "ff12:401b:8a01::ffff:ffff"  # round3-facts.md: saquery -g on ibsim for t1=0x0a01, ipoib
BCAST_A02 = "ff12:401b:8a02::ffff:ffff"
DEFAULT_BCAST = "ff12:401b:ffff::ffff:ffff"  # the default partition's (0x7fff, ipoib in SAFE_PARTITIONS)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IbFabric, SmPair]]:
    with sm_pair_lab(tmp_path_factory.mktemp("smpair-ipoib"), f"gf-t-spi-{os.getpid()}") as both:
        yield both


def layout(*pkeys: int) -> PartitionLayout:
    return PartitionLayout(tuple(
        Partition(f"tenant-{k:04x}", PKey(k), tuple(PartitionMember(g) for g in G[:2]), ipoib=True) for k in pkeys
    ))  # fmt: skip


def broadcast(drv: OpenSMDriver) -> dict[str, McGroup]:
    """The IPv4 broadcast groups of the master's SA dump, read over SSH like the check does."""
    m = drv.master()
    assert m.sa_dump is not None
    return {g.mgid: g for g in parse_sa_dump_groups(m.read(m.sa_dump) or "") if g.is_ipv4_broadcast}


def test_the_pairs_options_give_each_sm_host_its_own_sa_dump_and_the_check_reads_the_masters(
    lab: tuple[IbFabric, SmPair],
) -> None:
    fab, pair = lab
    opts = pair.driver_options(SM_NODE, SM)
    assert [(h["name"], h["sa_dump"]) for h in opts["sm_hosts"]] == [
        ("sm-01", str(fab.sa_dump)),
        ("sm-02", str(pair.dir / "osm-tmp" / "opensm-sa.dump")),
    ]
    assert not {"partitions_conf", "log_path", "pid_file", "sa_dump"} & set(opts)
    assert opts["trusted_sm_guids"] == [str(SM), str(STANDBY_PORT_GUID)]
    for conf in (fab.opensm_conf, pair.opensm_conf):  # each OpenSM dumps its SA, into its own dir
        lines = conf.read_text().splitlines()
        assert lines.count("sa_db_dump TRUE") == 1
    assert f"dump_files_dir {pair.dir / 'osm-tmp'}" in pair.opensm_conf.read_text().splitlines()
    reads: list[tuple[str, str]] = []
    with applied(pair, layout(0x0A01), reads=reads) as drv:  # the lease with IPoIB; apply ends with the group check
        assert ("sm-01", read_script(fab.sa_dump)) in reads
        assert not [r for r in reads if r[0] == "sm-02" and "opensm-sa.dump" in r[1]]
        g = broadcast(drv)[BCAST_A01]
        assert (g.mgid, g.pkey) == (BCAST_A01, 0x8A01)


def test_after_kill_9_the_check_reads_the_new_masters_dump_and_a_missing_or_stale_one_is_a_finding(
    lab: tuple[IbFabric, SmPair],
) -> None:
    fab, pair = lab
    reads: list[tuple[str, str]] = []
    with applied(pair, layout(0x0A01), reads=reads) as drv:
        t0 = time.monotonic()
        t_master = take_over(pair)
        reads.clear()
        drv.verify_groups(layout(0x0A01))  # SMInfo names sm-02 now: its dump, over its sshd
        t_check = time.monotonic() - t0
        assert drv.master().name == "sm-02"
        assert ("sm-02", read_script(pair.sa_dump)) in reads
        assert ("sm-01", read_script(fab.sa_dump)) not in reads
        g = broadcast(drv)[BCAST_A01]
        assert (g.mgid, g.pkey) == (BCAST_A01, 0x8A01)
        print(f"\nkill -9 -> standby SUBNET UP {t_master:.2f} s; -> IPoIB check passed on sm-02 {t_check:.2f} s")

        drv.apply(layout(0x0A01, 0x0A02))  # a second IPoIB lease, on the new master only
        assert (broadcast(drv)[BCAST_A02].pkey, BCAST_A02 in broadcast_of(fab.sa_dump)) == (0x8A02, False)
        drv.config = dataclasses.replace(drv.config, verify_timeout=0.5)

        # stale: the new master's dump as old as the dead master's (no group of 0x0a02)
        pair.sa_dump.write_text(fab.sa_dump.read_text())
        with pytest.raises(VerifyError) as ei:
            drv.verify_groups(layout(0x0A01, 0x0A02))
        e = ei.value
        assert e.message.startswith(f"SM host sm-02: OpenSM's SA database ({pair.sa_dump}) after 0.5s: ")
        assert f"no IPoIB broadcast group {BCAST_A02} (PKey 0x8a02)" in e.message
        assert (e.fields["sm_host"], e.fields["missing"], e.fields["missing_pkeys"]) == ("sm-02", [BCAST_A02], ["0x8a02"])  # fmt: skip

        # missing: no dump at all on the master (sa_db_dump off, or the file removed)
        pair.sa_dump.unlink()
        with pytest.raises(VerifyError) as ei:
            drv.verify_groups(layout(0x0A01, 0x0A02))
        e = ei.value
        assert (e.fields["sm_host"], e.fields["missing_pkeys"]) == ("sm-02", ["0x8a01", "0x8a02"])
        assert e.fields["missing"] == [BCAST_A01, BCAST_A02]

        # the next lease change re-sweeps: OpenSM writes the dump again and the check passes
        drv.config = dataclasses.replace(drv.config, verify_timeout=15)
        drv.apply(layout(0x0A01))
        assert set(broadcast(drv)) == {BCAST_A01, DEFAULT_BCAST}  # 0x0a02's group gone with its lease


def broadcast_of(dump: Path) -> set[str]:
    return {g.mgid for g in parse_sa_dump_groups(dump.read_text()) if g.is_ipv4_broadcast}
