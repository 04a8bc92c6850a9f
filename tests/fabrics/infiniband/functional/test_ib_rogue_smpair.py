"""A rogue OpenSM on a tenant HCA next to the lab's trusted master/standby pair (SM hosts over
SSH, pid-file SMs as many sites run them), detected and contained on real ibsim + OpenSM.

The rogue (priority 15, its own sm_key: :meth:`IbFabric.start_rogue_sm`) becomes MASTER beside
the trusted master and rewrites every table (the test waits for that before containing). Containment must cut its switch port, restart the
trusted master over SSH by its pid file (the SM SMInfo names master, not the first listed), and
leave the pair master/standby with every tenant's PKey table as the layout says (read by SMP).
After a failover (``kill -9`` of sm-01) the SM restarted is sm-02, the one SMInfo names master
(restarting the first listed, dead sm-01, fails: exit 3, no SM at its pid file). Prints the
seconds from the rogue's start to its detection, and the containment's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from gpufabric.domain.values import PKey
from gpufabric.fabrics.infiniband.audit.places import Places
from gpufabric.fabrics.infiniband.audit.rogue import RoguePolicy
from gpufabric.fabrics.infiniband.drivers.opensm.contain import check_rogue_sms, contain_rogue_sms
from gpufabric.fabrics.infiniband.readers.diags import parse_smpquery_portinfo
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember, SmState
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.netfile import hca_port_guid
from gpufabric.lab.smpair import STANDBY_PORT_GUID, SmPair

from support.ib_pair import applied, sm_pair_lab, take_over

pytestmark = pytest.mark.root

SM = hca_port_guid(0, 0)
G = [hca_port_guid(n, 0) for n in range(1, 5)]
STORED = Places({g: f"gpu-a{n:02d}" for n, g in enumerate(G, start=1)})  # what the inventory holds
LAYOUT = PartitionLayout((
    Partition("tenant-a", PKey(0x0A01), (PartitionMember(G[0]), PartitionMember(G[1]))),
    Partition("tenant-b", PKey(0x0B01), (PartitionMember(G[2]),)),
))  # fmt: skip


@pytest.fixture
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IbFabric, SmPair]]:
    with sm_pair_lab(tmp_path_factory.mktemp("rogue-pair"), f"gf-t-rsp-{os.getpid()}") as both:
        yield both  # fab.stop() also stops the rogue (its pid file in the fabric's run dir)


def test_rogue_sm_next_to_the_pair_is_cut_and_the_pair_stays_master_standby(lab: tuple[IbFabric, SmPair]) -> None:
    fab, pair = lab
    with applied(pair, LAYOUT) as drv:  # no restart hook: SSH
        master_pid, standby_pid = fab.opensm_pid, pair.standby_pid
        t0 = time.monotonic()
        fab.start_rogue_sm("gpu-a04 mlx5_0")
        while not (found := check_rogue_sms(drv, STORED)[0]):
            assert time.monotonic() - t0 < 15, "the rogue SM was never seen"
            time.sleep(0.05)
        detect = time.monotonic() - t0
        assert [(f.guid, f.node) for f in found] == [(G[3], "gpu-a04")]
        while {t.entries for t in drv.tables([G[0]])} != {(0xFFFF,)}:  # the rogue's own sweep rewrote it
            assert time.monotonic() - t0 < 20, "the rogue SM never rewrote a tenant's table"
            time.sleep(0.05)
        rewrote = time.monotonic() - t0
        rogue_port = drv.ports()[G[3]]
        report = contain_rogue_sms(drv, LAYOUT, RoguePolicy.CONTAIN, STORED)
        assert report.contained == (G[3],) and report.alerts == ()
        assert rogue_port.switch_lid is not None and rogue_port.switch_port is not None
        port = drv.diag.run(["smpquery", "portinfo", str(rogue_port.switch_lid), str(rogue_port.switch_port)])
        assert parse_smpquery_portinfo(port).phys_state == "Disabled"
        # the master was restarted over SSH by its pid file (a new PID there); the standby left as it ran
        assert fab.opensm_pid not in (None, master_pid) and pair.standby_pid == standby_pid
        ports = drv.ports(refresh=True)
        roles = {g: drv.diag.sminfo(ports[g].lid).state for g in (SM, STANDBY_PORT_GUID)}
        assert roles == {SM: SmState.MASTER, STANDBY_PORT_GUID: SmState.STANDBY}
        assert drv.master().name == "sm-01"
        tables = {t.port_guid: frozenset(t.entries) for t in drv.tables([G[0], G[1], G[2]])}
        assert tables == {G[0]: {0x7FFF, 0x8A01}, G[1]: {0x7FFF, 0x8A01}, G[2]: {0x7FFF, 0x8B01}}
        assert G[3] not in ports  # cut off
        assert check_rogue_sms(drv, STORED)[0] == ()
        print(f"rogue next to the SM pair: detected {detect:.2f}s after its start, tables rewritten at {rewrote:.2f}s "
              f"(observe {report.detect_seconds:.2f}s), contained + verified in {report.restore_seconds:.2f}s")  # fmt: skip


def test_after_a_failover_the_repair_restarts_the_standby_that_masters_not_the_first_listed(
    lab: tuple[IbFabric, SmPair],
) -> None:
    fab, pair = lab
    with applied(pair, LAYOUT) as drv:
        took = take_over(pair)  # kill -9 of sm-01: sm-02 masters, sm-01 stays down
        standby_pid = pair.standby_pid
        fab.start_rogue_sm("gpu-a04 mlx5_0")
        t0 = time.monotonic()
        while {t.entries for t in drv.tables([G[0]])} != {(0xFFFF,)}:
            assert time.monotonic() - t0 < 20, "the rogue SM never rewrote a tenant's table"
            time.sleep(0.05)
        report = contain_rogue_sms(drv, LAYOUT, RoguePolicy.CONTAIN, STORED)
        assert report.contained == (G[3],)
        assert pair.standby_pid not in (None, standby_pid)  # sm-02 restarted over SSH, by its pid file
        ports = drv.ports(refresh=True)
        assert drv.diag.sminfo(ports[STANDBY_PORT_GUID].lid).state is SmState.MASTER
        assert drv.master().name == "sm-02"
        tables = {t.port_guid: frozenset(t.entries) for t in drv.tables([G[0], G[1], G[2]])}
        assert tables == {G[0]: {0x7FFF, 0x8A01}, G[1]: {0x7FFF, 0x8A01}, G[2]: {0x7FFF, 0x8B01}}
        print(f"after a failover ({took:.2f}s): rogue contained + verified in {report.restore_seconds:.2f}s on sm-02")
