"""The OpenSM driver with SM hosts over SSH: a master/standby pair of real OpenSMs on one ibsim.

Fabric: 4 GPU nodes x 1 HCA, the master SM on ``sm-01 mlx5_0`` (priority 15) and the standby on
``sm-02 mlx5_0`` (priority 10, sminfo_polling_timeout 1000, polling_retry_number 2), each 'SM
host' reached through its own private sshd on 127.0.0.1 (its own dirs for partitions.conf, pid,
log). Tables are read by SMP (the batch reader, as sm-01's HCA). The failover test kills the
master with SIGKILL and prints the seconds until the standby masters the subnet with the
tenant's PKey still in place.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufabric.domain.errors import ApplyError, VerifyError
from gpufabric.domain.severity import Severity
from gpufabric.domain.values import Guid, PKey
from gpufabric.fabrics.infiniband.audit.hardening import parse_opensm_conf
from gpufabric.fabrics.infiniband.audit.sm_files import sm_file_violations
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMConfig, OpenSMDriver
from gpufabric.fabrics.infiniband.drivers.opensm.hosts import read_script
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember
from gpufabric.fabrics.infiniband.state.ipoib import broadcast_mgid, parse_sa_dump_groups
from gpufabric.lab.ib import SAFE_PARTITIONS, IbFabric
from gpufabric.lab.netfile import SM_NODE, hca_port_guid
from gpufabric.lab.smpair import STANDBY_PORT_GUID, SmPair

from support.ib_pair import Sampler, applied, pair_driver, sm_pair_lab, take_over

pytestmark = pytest.mark.root

SM = hca_port_guid(0, 0)
SM2 = STANDBY_PORT_GUID
G = [hca_port_guid(n, 0) for n in range(1, 5)]
TENANT = PartitionLayout((Partition("tenant-a", PKey(0x0A01), tuple(PartitionMember(g) for g in G[:2])),))


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IbFabric, SmPair]]:
    with sm_pair_lab(tmp_path_factory.mktemp("smhosts"), f"gf-t-smh-{os.getpid()}") as both:
        yield both


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def pkeys(drv: OpenSMDriver, g: Guid) -> frozenset[int]:
    return frozenset(drv.tables([g])[0].entries)


def test_lease_writes_every_sm_host_and_the_tenant_is_read_back_by_smp(lab: tuple[IbFabric, SmPair]) -> None:
    fab, pair = lab
    accepted = {n: s.accepted() for n, s in pair.sshd.items()}
    with applied(pair, TENANT) as drv:
        want = hashlib.sha256(drv.render(TENANT).encode()).hexdigest()
        assert sha(fab.partitions_conf) == sha(pair.partitions_conf) == want
        assert "pk_0a01" in pair.partitions_conf.read_text() or "0x0a01" in pair.partitions_conf.read_text()
        assert all(pair.sshd[n].accepted() > accepted[n] for n in pair.sshd)  # both written over SSH
        assert pkeys(drv, G[0]) == {0x7FFF, 0x8A01}
        assert pkeys(drv, G[2]) == {0x7FFF}
        state = drv.observe()
        assert {(f.host, f.role, f.sha256 == f.expected == want) for f in state.sm_files} == {
            ("sm-01", "master", True), ("sm-02", "standby", True),
        }  # fmt: skip
        assert sm_file_violations(state) == ()
        hardened = pair_driver(pair, opensm_conf=str(fab.opensm_conf)).settings()  # read on sm-01 over SSH
        assert dict(hardened)["sm_key"] == dict(parse_opensm_conf(fab.opensm_conf.read_text()))["sm_key"]


def test_standby_with_a_stale_file_is_critical_and_the_next_write_repairs_it(lab: tuple[IbFabric, SmPair]) -> None:
    fab, pair = lab
    with applied(pair, TENANT) as drv:
        pair.partitions_conf.write_text(SAFE_PARTITIONS)  # edited by hand on the standby
        found = sm_file_violations(drv.observe())
        assert [(v.invariant, v.severity, v.device) for v in found] == [
            ("IB-SM-CONFIG-DIVERGED", Severity.CRITICAL, "sm-02")
        ]
        assert "revert tenant isolation" in found[0].message
        drv.apply(TENANT)  # same layout, tables unchanged: the standby's file is rewritten all the same
        assert sha(pair.partitions_conf) == sha(fab.partitions_conf)
        assert sm_file_violations(drv.observe()) == ()


def test_an_unreachable_standby_fails_the_apply_naming_it_and_the_master_is_not_touched(
    lab: tuple[IbFabric, SmPair],
) -> None:
    fab, pair = lab
    try:
        with applied(pair, TENANT) as drv:
            before = fab.partitions_conf.read_text()
            pair.sshd["sm-02"].stop()
            moved = PartitionLayout(
                (Partition("tenant-a", PKey(0x0A01), (PartitionMember(G[0]), PartitionMember(G[2]))),)
            )
            with pytest.raises(ApplyError) as ei:
                drv.apply(moved)
            assert ei.value.message.startswith("SM host sm-02: cannot connect")
            assert ei.value.fields["sm_host"] == "sm-02" and ei.value.fields["sm_hosts_written"] == []
            assert fab.partitions_conf.read_text() == before  # standby first: the master never got the new file
            assert pkeys(drv, G[2]) == {0x7FFF} and pkeys(drv, G[1]) == {0x7FFF, 0x8A01}  # nothing reloaded
    finally:
        pair.sshd["sm-02"].start()


def ipoib_layout(*pkeys: int) -> PartitionLayout:
    return PartitionLayout(tuple(
        Partition(f"tenant-{k:04x}", PKey(k), tuple(PartitionMember(g) for g in G[:2]), ipoib=True) for k in pkeys
    ))  # fmt: skip


def groups_in(dump: Path) -> set[str]:
    return {g.mgid for g in parse_sa_dump_groups(dump.read_text())}


def test_ipoib_groups_are_read_back_over_ssh_on_the_master_and_after_kill_9_on_the_new_master(
    lab: tuple[IbFabric, SmPair],
) -> None:
    """Regression (issue 20): with sm_hosts the broadcast groups were read from a local file
    (or not at all): after a failover nothing checked them on the SM that now serves the SA."""
    fab, pair = lab
    reads: list[tuple[str, str]] = []  # what each SM host is asked over SSH
    standby_dump = pair.dir / "osm-tmp" / "opensm-sa.dump"
    try:
        # the lease with IPoIB: its group checked on sm-01
        with applied(pair, ipoib_layout(0x0A01), reads=reads) as drv:
            assert ("sm-01", read_script(fab.sa_dump)) in reads
            assert ("sm-02", read_script(standby_dump)) not in reads  # the standby's SA is not the one that serves
            assert broadcast_mgid(0x0A01) == "ff12:401b:8a01::ffff:ffff"
            assert broadcast_mgid(0x0A01) in groups_in(fab.sa_dump)
            short = dataclasses.replace(drv.config, verify_timeout=0.5)
            drv.config = short
            with pytest.raises(VerifyError) as ei:
                drv.verify_groups(ipoib_layout(0x0A01, 0x0A02))  # 0x0a02 was never applied: no group
            assert ei.value.message.startswith("SM host sm-01: ") and "(PKey 0x8a02)" in ei.value.message
            assert ei.value.fields["sm_host"] == "sm-01" and ei.value.fields["missing_pkeys"] == ["0x8a02"]
            t = take_over(pair)
            assert drv.diag.sminfo().guid == SM2 and drv.master().name == "sm-02"
            reads.clear()
            drv.config = dataclasses.replace(short, verify_timeout=15)
            drv.apply(ipoib_layout(0x0A01, 0x0A02))  # the group of 0x0a02 exists only on the new master
            assert ("sm-02", read_script(standby_dump)) in reads
            assert ("sm-01", read_script(fab.sa_dump)) not in reads  # sm-01's file is still written; its SA is gone
            assert broadcast_mgid(0x0A02) in groups_in(standby_dump)
            assert broadcast_mgid(0x0A02) not in groups_in(fab.sa_dump)  # the dead SM's dump: a check there would fail
            drv.config = short
            with pytest.raises(VerifyError) as ei:
                drv.verify_groups(ipoib_layout(0x0A01, 0x0A03))
            assert ei.value.message.startswith("SM host sm-02: ") and "(PKey 0x8a03)" in ei.value.message
            print(f"\nIPoIB read-back: sm-01, then sm-02 after kill -9 (took over in {t:.2f} s)")
    finally:
        pair.stop_standby()  # back to a master/standby pair for the next test
        fab.start_opensm()
        pair.start_standby()


def test_control_a_standby_the_driver_never_wrote_reverts_the_tenant(lab: tuple[IbFabric, SmPair]) -> None:
    """What the driver of 2860902 (one local SM) leaves behind: the takeover drops the tenant."""
    fab, pair = lab
    pair.partitions_conf.write_text(SAFE_PARTITIONS)  # a standby nobody wrote
    opts = fab.driver_options(SM_NODE, [SM, SM2])
    opts.pop("sa_dump")
    local = OpenSMDriver(dataclasses.replace(OpenSMConfig.from_options(opts), verify_timeout=15, sweep_timeout=30))
    try:
        local.apply(TENANT)
        assert pkeys(local, G[0]) == {0x7FFF, 0x8A01}
        sampler = Sampler(fab, local.ports()[G[0]].lid)
        sampler.start()
        take_over(pair)
        assert local.diag.sminfo().guid == SM2
        deadline = time.monotonic() + 10
        while pkeys(local, G[0]) != {0x7FFF} and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pkeys(local, G[0]) == {0x7FFF}  # the tenant's PKey is gone: isolation reverted
        assert {0x7FFF} in {e for _, e in sampler.stop()}  # the independent sampler saw it go
    finally:
        local.close()
        pair.stop_standby()  # back to a master/standby pair for the next test
        fab.start_opensm()
        pair.start_standby()


def test_kill_9_of_the_master_the_standby_keeps_the_tenant_pkey(lab: tuple[IbFabric, SmPair]) -> None:
    fab, pair = lab
    with applied(pair, TENANT) as drv:
        assert pkeys(drv, G[0]) == {0x7FFF, 0x8A01}
        assert drv.diag.sminfo().guid == SM
        sampler = Sampler(fab, drv.ports()[G[0]].lid)
        sampler.start()
        offset = pair.log_offset()
        t0 = time.monotonic()
        pair.kill_master()
        while not pair.log_has(offset, "Entering MASTER state"):
            assert time.monotonic() - t0 < 30, "the standby did not take over"
            time.sleep(0.02)
        t_master = time.monotonic() - t0
        while not pair.log_has(offset, "SUBNET UP"):
            assert time.monotonic() - t0 < 60, "the new master did not bring the subnet up"
            time.sleep(0.02)
        t_up = time.monotonic() - t0
        time.sleep(1.0)  # the new master's sweep has programmed the tables by now
        samples = sampler.stop()
        after = [e for t, e in samples if t - t0 > t_up]
        assert after and len(samples) >= 10
        assert all(e == {0x7FFF, 0x8A01} for _, e in samples), sorted({tuple(sorted(e)) for _, e in samples})
        assert drv.diag.sminfo().guid == SM2
        assert pkeys(drv, G[0]) == {0x7FFF, 0x8A01}  # programmed by the new master from the file we wrote
        assert pkeys(drv, G[1]) == {0x7FFF, 0x8A01}
        assert pkeys(drv, G[2]) == {0x7FFF}
        print(f"\nfailover: standby MASTER {t_master:.2f} s, SUBNET UP {t_up:.2f} s after kill -9 of the master; "
              f"{len(samples)} independent SMP samples of the tenant's port, all with 0x8a01")  # fmt: skip
        # a move now goes to the new master (found by SMInfo), which reloads and verifies it
        moved = PartitionLayout((Partition("tenant-a", PKey(0x0A01), (PartitionMember(G[0]), PartitionMember(G[2]))),))
        drv.apply(moved)
        assert drv.master().name == "sm-02"
        assert pkeys(drv, G[2]) == {0x7FFF, 0x8A01}
        assert pkeys(drv, G[1]) == {0x7FFF}
