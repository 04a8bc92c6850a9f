"""A rogue OpenSM on a tenant HCA, detected and contained, on real ibsim + OpenSM 3.3.23.

The rogue (what a tenant with root on its host can run) uses priority 15 and its own
secret sm_key: it then ignores the trusted master's SMInfo, becomes MASTER as well and
rewrites every table (every CA a full member of 0xffff in < 1 s); the trusted SM does not
repair anything until it is restarted. (Without a key, priority alone raced here: the
handover sometimes left both SMs STANDBY - no master at all.) Detection must name the rogue's GUID and
node; containment must disable its switch port, restart the trusted SM and leave every
other port with exactly its intended PKeys (read by SMP).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from collections.abc import Iterator, Sequence

import pytest

from gpufabric.domain.errors import GpufabricError
from gpufabric.domain.values import PKey
from gpufabric.fabrics.infiniband.audit.places import Places
from gpufabric.fabrics.infiniband.audit.rogue import RoguePolicy
from gpufabric.fabrics.infiniband.drivers.opensm.contain import contain_rogue_sms
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMConfig, OpenSMDriver
from gpufabric.fabrics.infiniband.drivers.opensm.smpread import SmpQuery, SmpReader, SmpValue
from gpufabric.fabrics.infiniband.readers.diags import PortInfo, parse_smpquery_portinfo
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember, SmState
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.netfile import SM_NODE, generate_netfile, hca_port_guid
from gpufabric.lab.procs import stop_pid

pytestmark = pytest.mark.root

SM = hca_port_guid(0, 0)
G = [hca_port_guid(n, 0) for n in range(1, 5)]
STORED = Places({g: f"gpu-a{n:02d}" for n, g in enumerate(G, start=1)})  # what the inventory holds
ROGUE_HOST = "gpu-a04 mlx5_0"
LAYOUT = PartitionLayout(
    (
        Partition("tenant-a", PKey(0x0A01), (PartitionMember(G[0]), PartitionMember(G[1]))),
        Partition("tenant-b", PKey(0x0B01), (PartitionMember(G[2]), PartitionMember(G[3]))),
    )
)


@pytest.fixture
def fab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IbFabric]:
    f = IbFabric(tmp_path_factory.mktemp("ibr"), f"gf-t-rogue-{os.getpid()}", SM_NODE)
    try:
        f.start_ibsim(generate_netfile(4, 1))
        f.start_opensm()
        yield f
    finally:
        f.stop()


def restart_trusted(fab: IbFabric) -> None:
    stop_pid(fab.opensm_pid)
    (fab.run_dir / "opensm.pid").unlink(missing_ok=True)
    fab.start_opensm()


@pytest.fixture
def rogue(fab: IbFabric) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Call ``start_rogue(fab, procs)`` to start it; stopped (by PID) at teardown."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        stop_pid(p.pid)


def start_rogue(fab: IbFabric, procs: list[subprocess.Popen[bytes]]) -> None:
    d = fab.run_dir / "rogue"
    d.mkdir()
    (d / "p.conf").write_text("Default=0x7fff : ALL=full ;\n")
    (d / "o.conf").write_text("force_log_flush TRUE\n")
    env = fab.tool_env(ROGUE_HOST)
    env["OSM_TMP_DIR"] = env["OSM_CACHE_DIR"] = str(d)
    p = subprocess.Popen(
        ["opensm", "-F", "o.conf", "-P", "p.conf", "-f", "r.log", "-s", "0", "-p", "15", "-k", "0x5ec2e7"],
        cwd=d,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    procs.append(p)


def test_rogue_sm_detected_and_contained(fab: IbFabric, rogue: list[subprocess.Popen[bytes]]) -> None:
    drv = OpenSMDriver(
        dataclasses.replace(
            OpenSMConfig.from_options(fab.driver_options(SM_NODE, [SM])),
            verify_timeout=15,
            sweep_timeout=30,
        ),
        restart_hook=lambda: restart_trusted(fab),
    )
    drv.apply(LAYOUT)
    assert contain_rogue_sms(drv, LAYOUT, RoguePolicy.CONTAIN, STORED).findings == ()  # nothing to find yet
    start_rogue(fab, rogue)
    # wait until the rogue has rewritten a tenant table (it runs its own sweep)
    deadline = time.monotonic() + 20
    while {t.entries for t in drv.tables([G[0]])} != {(0xFFFF,)}:
        assert time.monotonic() < deadline, (
            f"the rogue SM never rewrote the tables: {drv.tables([G[0]])} {fab.run_tool(['sminfo'])} "
            + (fab.run_dir / "rogue" / "r.log").read_text()[-600:]
        )
        time.sleep(0.1)

    alert = contain_rogue_sms(drv, LAYOUT, RoguePolicy.ALERT, STORED)
    assert [f.guid for f in alert.findings] == [G[3]]
    assert alert.findings[0].node == "gpu-a04"
    assert alert.findings[0].state is SmState.MASTER
    assert "master" in alert.findings[0].reason
    assert alert.contained == ()

    rogue_port = drv.ports()[G[3]]
    report = contain_rogue_sms(drv, LAYOUT, RoguePolicy.CONTAIN, STORED)
    assert report.contained == (G[3],)
    tables = {t.port_guid: frozenset(t.entries) for t in drv.tables([SM, G[0], G[1], G[2]])}
    assert tables == {SM: {0xFFFF}, G[0]: {0x7FFF, 0x8A01}, G[1]: {0x7FFF, 0x8A01}, G[2]: {0x7FFF, 0x8B01}}
    state = drv.observe()
    assert state.master_guid == SM
    assert G[3] not in {t.port_guid for t in state.tables}  # cut off
    assert G[3] not in drv.ports()
    assert rogue_port.switch_lid is not None and rogue_port.switch_port is not None
    info = parse_smpquery_portinfo(
        drv.diag.run(["smpquery", "portinfo", str(rogue_port.switch_lid), str(rogue_port.switch_port)])
    )
    assert info.phys_state == "Disabled"
    print(f"rogue: detect {report.detect_seconds:.2f}s restore {report.restore_seconds:.2f}s")


class DecoyReader:
    """The driver's SMP reader, with one port's MasterSMLID replaced by a LID no port has
    (what a tenant could make a port report): a finding that cannot be placed."""

    def __init__(self, inner: SmpReader, lid: int, decoy: int = 999) -> None:
        self.inner, self.lid, self.decoy = inner, lid, decoy

    def read(self, queries: Sequence[SmpQuery]) -> list[SmpValue | GpufabricError]:
        got = self.inner.read(queries)
        return [
            dataclasses.replace(r, sm_lid=self.decoy) if q.op == "portinfo" and q.lid == self.lid and isinstance(r, PortInfo) else r
            for q, r in zip(queries, got, strict=True)
        ]  # fmt: skip

    def close(self) -> None:
        self.inner.close()


def test_decoy_finding_does_not_stop_containment_and_the_map_is_fresh(
    fab: IbFabric, rogue: list[subprocess.Popen[bytes]]
) -> None:
    """Regression: one finding at a LID that is no discovered CA port (a decoy MasterSMLID of
    999) aborted containment before anything was disabled; and the LID -> switch-port map
    used for the cut was whatever cached topology the driver held."""
    drv = OpenSMDriver(
        dataclasses.replace(
            OpenSMConfig.from_options(fab.driver_options(SM_NODE, [SM])), verify_timeout=15, sweep_timeout=30
        ),
        restart_hook=lambda: restart_trusted(fab),
    )
    drv.apply(LAYOUT)
    start_rogue(fab, rogue)
    deadline = time.monotonic() + 20
    while {t.entries for t in drv.tables([G[0]])} != {(0xFFFF,)}:
        assert time.monotonic() < deadline, "the rogue SM never rewrote the tables"
        time.sleep(0.1)
    drv.reader = DecoyReader(drv.reader, drv.ports()[G[0]].lid)
    drv._ports = {g: p for g, p in drv.ports().items() if g != G[3]}  # a stale map: the rogue's port not in it
    report = contain_rogue_sms(drv, LAYOUT, RoguePolicy.CONTAIN, STORED)
    assert sorted(f.lid for f in report.findings)[-1] == 999
    assert report.contained == (G[3],), (report.findings, report.alerts)  # the real rogue is cut ...
    assert [(f.lid, "no discovered CA port" in why) for f, why in report.alerts] == [
        (999, True)
    ]  # ... the decoy reported
    drv.reader = drv.reader.inner  # type: ignore[attr-defined]
    tables = {t.port_guid: frozenset(t.entries) for t in drv.tables([SM, G[0], G[1], G[2]])}
    assert tables == {SM: {0xFFFF}, G[0]: {0x7FFF, 0x8A01}, G[1]: {0x7FFF, 0x8A01}, G[2]: {0x7FFF, 0x8B01}}
    drv.close()
