"""IPoIB broadcast groups and M_Key on a real OpenSM 3.3.23 + ibsim (started here).

Groups are checked independently of the driver: ``saquery -g`` run *as a tenant member's
HCA* (OpenSM's SA hides a group from a requester outside its partition, so the SM node's
own port would never see a tenant group). The driver reads OpenSM's SA dump itself.
ibsim does not enforce M_Key: only that every tool is handed it can be shown here.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpufabric.domain.errors import CapacityError
from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import Lease, Network
from gpufabric.domain.values import Guid, PKey
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMConfig, OpenSMDriver
from gpufabric.fabrics.infiniband.entries import IbPort
from gpufabric.fabrics.infiniband.plan import desired_ib
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember
from gpufabric.fabrics.infiniband.state.ipoib import broadcast_mgid, parse_saquery_groups
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.netfile import SM_NODE, generate_netfile, hca_port_guid

from support.ports import port_node
from support.segments import segment

pytestmark = pytest.mark.root

NODES = 20
SM = hca_port_guid(0, 0)
G = [hca_port_guid(n, 0) for n in range(1, NODES + 1)]
PK = 0x0A00


@pytest.fixture(scope="module")
def fab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IbFabric]:
    f = IbFabric(tmp_path_factory.mktemp("ibipoib"), f"gf-t-ipoib-{os.getpid()}", SM_NODE)
    try:
        f.start_ibsim(generate_netfile(NODES, 1))
        f.start_opensm()
        yield f
    finally:
        f.stop()


def driver_for(fab: IbFabric, **kw: object) -> OpenSMDriver:
    cfg = OpenSMConfig.from_options(fab.driver_options(SM_NODE, [SM]))
    return OpenSMDriver(dataclasses.replace(cfg, verify_timeout=10, sweep_timeout=30, **kw))  # type: ignore[arg-type]


def groups_seen_by(fab: IbFabric, host: str) -> set[str]:
    return {g.mgid for g in parse_saquery_groups(fab.run_tool(["saquery", "-g"], host))}


def tenancy(leased: bool) -> Tenancy:
    net = Network("alpha-net", "alpha", (segment("infiniband", 3000, pkey=PKey(PK)),))
    nodes = tuple(port_node(f"gpu-a{n:02d}", ib=(IbPort(f"gpu-a{n:02d}", "mlx5_0", 1, G[n - 1], G[n - 1]),)) for n in (1, 2))
    owners = {
        "gpu-a01": Lease("alpha", "gpu-a01", datetime(2026, 1, 1, tzinfo=UTC), networks=("alpha-net",))
        if leased
        else None
    }
    return Tenancy(nodes, owners, {("alpha", "alpha-net"): net})


def test_lease_join_creates_the_broadcast_group_and_the_move_out_removes_it(fab: IbFabric) -> None:
    """Regression: tenant partitions had no ``ipoib`` flag, so ``saquery -g`` listed only the
    default partition's group after a lease and IPoIB never came up on the tenant PKey."""
    drv = driver_for(fab)
    mgid = broadcast_mgid(PK)
    assert mgid == "ff12:401b:8a00::ffff:ffff"
    drv.apply(desired_ib(tenancy(leased=True), [SM]).layout)  # the join of gpu-a01's lease
    assert f"pk_{PK:04x}=0x{PK:04x}, ipoib :" in fab.partitions_conf.read_text()
    assert mgid in groups_seen_by(fab, "gpu-a01 mlx5_0")  # the tenant member sees its group
    assert mgid not in groups_seen_by(fab, "gpu-a02 mlx5_0")  # a non-member does not
    drv.apply(desired_ib(tenancy(leased=False), [SM]).layout)  # moved out: quarantine
    assert groups_seen_by(fab, "gpu-a01 mlx5_0") == {"ff12:401b:ffff::ffff:ffff"}
    assert "8a00" not in fab.sa_dump.read_text()


def test_options_reach_the_group(fab: IbFabric) -> None:
    drv = driver_for(
        fab, ipoib=dataclasses.replace(OpenSMConfig.from_options(fab.driver_options(SM_NODE, [SM])).ipoib, rate=7)
    )
    drv.apply(desired_ib(tenancy(leased=True), [SM]).layout)
    assert ", ipoib, rate=7 :" in fab.partitions_conf.read_text()
    rates = {g.mgid: g.rate for g in parse_saquery_groups(fab.run_tool(["saquery", "-g"], "gpu-a01 mlx5_0"))}
    assert rates[broadcast_mgid(PK)] == 0x87  # selector "exactly" + rate 7 (40 Gb/s)
    drv.apply(PartitionLayout())


def test_more_ipoib_partitions_than_multicast_lids_refused_before_writing(fab: IbFabric) -> None:
    drv = driver_for(fab)
    drv.apply(PartitionLayout())
    before = fab.partitions_conf.read_text()
    assert drv.mcast_fdb_cap() == 1024  # read from the switches by SMP (smpquery switchinfo)
    parts = tuple(
        Partition(f"p{i}", PKey(0x1000 + i), (PartitionMember(G[i % NODES]),), ipoib=True) for i in range(1024)
    )  # 1,024 groups + the default partition's: one more than the switches hold
    with pytest.raises(CapacityError, match="MulticastFDBCap 1024"):
        drv.apply(PartitionLayout(parts))
    assert fab.partitions_conf.read_text() == before  # nothing written, OpenSM never ran out


def test_every_smp_tool_is_handed_the_m_key_on_stdin(fab: IbFabric, tmp_path: Path) -> None:
    log = tmp_path / "argv.log"
    wrap = tmp_path / "wrap.sh"
    wrap.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec "$@"\n')
    wrap.chmod(0o755)
    assert fab.m_key_file.exists()
    key = fab.m_key_file.read_text().strip()
    for reader in ("batch", "smpquery"):
        drv = driver_for(fab, diag_prefix=(str(wrap),), reader=reader)
        try:
            state = drv.observe()  # ibnetdiscover + PKey tables, PortInfo, SMInfo
            assert state.master_guid == SM  # ibsim ignores the key: the reads still work
            drv.diag.sminfo()
        finally:
            drv.close()
    victim = drv.ports()[G[-1]]
    assert victim.switch_lid is not None and victim.switch_port is not None
    drv.diag.port_disable(victim.switch_lid, victim.switch_port)  # what containment sends
    drv.diag.port_enable(victim.switch_lid, victim.switch_port)
    fab.wait_subnet_up(fab.hup())  # the SM brings the port back
    lines = log.read_text().splitlines()
    tools = {line.split()[0].rsplit("/", 1)[-1] for line in lines}
    assert {"ibnetdiscover", "smpquery", "sminfo", "ibportstate"} <= tools
    assert any("smpbatch" in line for line in lines)
    # each is told to read the key from its stdin, none has it on its command line (that the
    # MADs carry it: tests/fabrics/infiniband/functional/test_ib_mkey_argv.py)
    missing = [line for line in lines if "-z /dev/stdin" not in line and "--m-key-stdin" not in line]
    assert missing == []
    assert not [line for line in lines if key[2:].lower() in line.lower() or " -y " in line]
    assert any(line.endswith("disable") and "ibportstate -z /dev/stdin" in line for line in lines)


def test_lab_writes_the_m_key_and_the_sa_dump_option(fab: IbFabric) -> None:
    opts = fab.driver_options(SM_NODE, [SM])
    assert opts["m_key_file"] == str(fab.m_key_file) and opts["sa_dump"] == str(fab.sa_dump)
    assert fab.m_key_file.stat().st_mode & 0o077 == 0
    conf = fab.opensm_conf.read_text()
    assert f"m_key {fab.m_key_file.read_text().strip()}" in conf and "sa_db_dump TRUE" in conf
    assert Guid.parse(opts["trusted_sm_guids"][0]) == SM


def test_lab_restart_keeps_the_sm_keys(fab: IbFabric) -> None:
    """The driver loaded the M_Key file once: a restart of the trusted SM (what containment
    runs) must not hand the fabric a new key."""
    key, conf = fab.m_key_file.read_text(), fab.opensm_conf.read_text()
    fab.restart_opensm()
    assert fab.m_key_file.read_text() == key
    assert fab.opensm_conf.read_text() == conf


def test_a_networks_own_options_reach_its_group_and_ipoib_false_makes_none(fab: IbFabric) -> None:
    """Issue 20 item 4: per-network settings. alpha-net asks rate 16 (100 Gb/s) and MTU 4
    (2048) for its partition, beta-net no IPoIB at all; the subnet's own settings are the
    defaults. Read independently with ``saquery -g`` as each network's member."""
    pk_b = PK + 1
    nets = {
        ("alpha", "alpha-net"): Network("alpha-net", "alpha", (
            segment("infiniband", 3000, pkey=PKey(PK), options=(("mtu", 4), ("rate", 16))),)),
        ("beta", "beta-net"): Network("beta-net", "beta", (
            segment("infiniband", 3001, pkey=PKey(pk_b), options=(("ipoib", False),)),)),
    }  # fmt: skip
    nodes = tuple(port_node(f"gpu-a{n:02d}", ib=(IbPort(f"gpu-a{n:02d}", "mlx5_0", 1, G[n - 1], G[n - 1]),)) for n in (1, 2))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    owners = {"gpu-a01": Lease("alpha", "gpu-a01", start, networks=("alpha-net",)),
              "gpu-a02": Lease("beta", "gpu-a02", start, networks=("beta-net",))}  # fmt: skip
    drv = driver_for(fab)
    drv.apply(desired_ib(Tenancy(nodes, owners, nets), [SM]).layout)  # verified: groups and their MTU/rate read back
    text = fab.partitions_conf.read_text()
    assert f"pk_{PK:04x}=0x{PK:04x}, ipoib, mtu=4, rate=16 :" in text and f"pk_{pk_b:04x}=0x{pk_b:04x} :" in text
    a = {g.mgid: (g.mtu, g.rate) for g in parse_saquery_groups(fab.run_tool(["saquery", "-g"], "gpu-a01 mlx5_0"))}
    assert a[broadcast_mgid(PK)] == (0x84, 0x90)  # selector "exactly" + MTU 4 / rate 16
    b = {g.mgid for g in parse_saquery_groups(fab.run_tool(["saquery", "-g"], "gpu-a02 mlx5_0"))}
    assert b == {"ff12:401b:ffff::ffff:ffff"}  # beta's partition has no broadcast group
    drv.apply(PartitionLayout())
