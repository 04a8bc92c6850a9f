"""OVSDB drivers sharing one connection per database server (OvsdbPool), against a private
ovsdb-server/ovs-vswitchd: the number of sessions is read from ovsdb-server itself
(``memory/show``), the apply confirmation from ``Open_vSwitch.cur_cfg`` with ovs-vswitchd
stopped (SIGSTOP) and resumed."""

from __future__ import annotations

import os
import re
import secrets
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufabric.domain.errors import ApplyError
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.drivers.ovsdb.driver import OvsdbSwitchDriver
from gpufabric.fabrics.ethernet.drivers.ovsdb.pool import OvsdbPool
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode
from gpufabric.lab.ovs import OvsServer
from gpufabric.lab.procs import run
from gpufabric.store.registry import Registry

pytestmark = pytest.mark.root

Q = VlanId(4000)
BRIDGES = 32
PORTS = 8


class Ovs:
    def __init__(self, ovs: OvsServer, prefix: str) -> None:
        self.ovs, self.prefix = ovs, prefix
        self.bridges = [f"{prefix}b{i:02d}" for i in range(BRIDGES)]

    def ports(self, br: str) -> list[str]:
        return [f"{br}p{k}" for k in range(PORTS)]

    def sessions(self) -> int:
        out = run(["ovs-appctl", "-t", str(self.ovs.run_dir / "ovsdb-server.ctl"), "memory/show"])
        m = re.search(r"sessions:(\d+)", out)
        return int(m.group(1)) if m else 0

    def settled_sessions(self, timeout: float = 5.0) -> int:
        """The session count once the sessions closed before are gone: ovsdb-server ends a closed
        one on its next poll loop, so a count read right after a close may still hold it."""
        deadline = time.monotonic() + timeout
        last, same = self.sessions(), 0
        while same < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
            now = self.sessions()
            same, last = (same + 1 if now == last else 0), now
        return last

    def cfg(self) -> tuple[int, int]:
        nxt = int(self.ovs.vsctl("get", "Open_vSwitch", ".", "next_cfg").strip())
        cur = int(self.ovs.vsctl("get", "Open_vSwitch", ".", "cur_cfg").strip())
        return nxt, cur


@pytest.fixture(scope="module")
def ovs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ovs]:
    prefix = "gp" + secrets.token_hex(2)
    server = OvsServer(tmp_path_factory.mktemp("ovsdb-pool"), netns=f"{prefix}-ovs")
    server.start()
    o = Ovs(server, prefix)
    try:
        args: list[str] = []
        for br in o.bridges:
            args += ["--", "add-br", br, "--", "set", "bridge", br, "datapath_type=netdev"]
            for p in o.ports(br):
                args += ["--", "add-port", br, p, "--", "set", "interface", p, "type=internal"]
        server.vsctl(*args[1:], timeout=120)
        yield o
    finally:
        server.stop()


def _access(br: str, port: str, vlan: int) -> EthernetPortConfig:
    return EthernetPortConfig(br, port, PortMode.ACCESS, VlanId(vlan))


def test_two_drivers_on_one_remote_share_one_connection(ovs: Ovs) -> None:
    pool = OvsdbPool()
    before = ovs.settled_sessions()
    a, b = ovs.bridges[0], ovs.bridges[1]
    d1 = OvsdbSwitchDriver(a, ovs.ovs.remote, Q, 10, pool=pool)
    d2 = OvsdbSwitchDriver(b, ovs.ovs.remote, Q, 10, pool=pool)
    try:
        d1.apply([_access(a, ovs.ports(a)[0], 2001)])
        d2.apply([_access(b, ovs.ports(b)[0], 2002)])
        assert d1.observe().port(ovs.ports(a)[0]) == _access(a, ovs.ports(a)[0], 2001)
        assert d2.observe().port(ovs.ports(b)[0]) == _access(b, ovs.ports(b)[0], 2002)
        assert pool.connections_opened == 1
        assert ovs.sessions() == before + 1  # as ovsdb-server counts them
        d1.close()  # a shared connection outlives one driver's close
        assert d2.observe().port(ovs.ports(b)[0]) == _access(b, ovs.ports(b)[0], 2002)
    finally:
        pool.close()
    assert ovs.sessions() == before


def test_backend_from_config_shares_one_pool(ovs: Ovs) -> None:
    section = [{"driver": "ovsdb", "options": {"switch": br, "remote": ovs.ovs.remote}} for br in ovs.bridges[:4]]
    backend = EthernetKind().build(section, Registry.from_entry_points().get, {"quarantine_vlan": 4000})
    try:
        assert len(backend.observe()) == 4
        assert backend.pool is not None and backend.pool.connections_opened == 1
    finally:
        backend.close()


def test_apply_returns_once_vswitchd_applied_it(ovs: Ovs) -> None:
    br = ovs.bridges[2]
    port = ovs.ports(br)[0]
    vswitchd = ovs.ovs.pids()["ovs-vswitchd"]
    assert vswitchd
    with OvsdbSwitchDriver(br, ovs.ovs.remote, Q, 10) as d:
        d.apply([_access(br, port, 2010)])
        nxt, cur = ovs.cfg()
        assert cur >= nxt  # confirmed on return
        os.kill(vswitchd, signal.SIGSTOP)  # vswitchd cannot apply anything now
        try:
            d.timeout = 1.0
            t0 = time.monotonic()
            with pytest.raises(ApplyError, match="did not apply"):
                d.apply([_access(br, port, 2011)])
            assert time.monotonic() - t0 >= 1.0  # it waited, bounded
            nxt, cur = ovs.cfg()
            assert cur < nxt
        finally:
            os.kill(vswitchd, signal.SIGCONT)
        d.timeout = 10.0
        d.apply([_access(br, port, 2012)])
        nxt, cur = ovs.cfg()
        assert cur >= nxt


def test_observe_of_32_bridges_one_connection(ovs: Ovs) -> None:
    pool = OvsdbPool()
    before = ovs.settled_sessions()
    drivers = [OvsdbSwitchDriver(br, ovs.ovs.remote, Q, 10, pool=pool) for br in ovs.bridges]
    try:
        states = [d.observe() for d in drivers]
        assert [sorted(p.port for p in s.ports) for s in states] == [sorted(ovs.ports(b)) for b in ovs.bridges]
        assert ovs.sessions() == before + 1  # one connection for all 32 (its speed is bench/'s to measure)
    finally:
        pool.close()


def test_private_pool_when_none_given(ovs: Ovs, tmp_path: Path) -> None:
    br = ovs.bridges[3]
    before = ovs.settled_sessions()
    d1 = OvsdbSwitchDriver(br, ovs.ovs.remote, Q, 10)
    d2 = OvsdbSwitchDriver(br, ovs.ovs.remote, Q, 10)
    try:
        d1.observe()
        d2.observe()
        assert ovs.sessions() == before + 2
    finally:
        d1.close()
        d2.close()
    deadline = time.monotonic() + 5.0  # ovsdb-server ends a closed session on its next poll loop
    while ovs.sessions() != before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ovs.sessions() == before
