"""SshSwitchDriver for real: a local sshd on 127.0.0.1 fronting a private OVS.

The driver runs ``ovs-vsctl --db=unix:<private socket>`` over SSH. SSH sessions are
counted on the server side (``Accepted publickey`` lines of the sshd log). Port and
bridge names carry a per-run prefix (tap devices of the netdev datapath are global).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufabric.domain.errors import ApplyError
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.drivers.ssh.dialects import dialect_from_dict
from gpufabric.fabrics.ethernet.drivers.ssh.driver import SshSwitchDriver
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode
from gpufabric.lab.ovs import OvsServer
from gpufabric.lab.sshd import SshServer, free_port

pytestmark = pytest.mark.root
NPORTS = 60
Q = 999


class Lab:
    def __init__(self, root: Path) -> None:
        self.tag = f"gs{secrets.token_hex(2)}"
        self.bridge = f"{self.tag}br"
        self.ports = [f"{self.tag}p{i:03d}" for i in range(1, NPORTS + 1)]
        self.ovs = OvsServer(root / "ovs", netns=f"{self.tag}-ovs")  # own netns: own netdev datapath
        self.sshd = SshServer(root / "ssh")

    def start(self) -> None:
        self.ovs.start()
        self.ovs.add_bridge(self.bridge, self.ports)
        self.sshd.start()

    def stop(self) -> None:
        self.sshd.stop()
        if self.ovs.running():
            self.ovs.vsctl("--if-exists", "del-br", self.bridge)  # removes the tap devices
        self.ovs.stop()
        for dev in [self.bridge, *self.ports]:  # in case vswitchd left any behind
            subprocess.run(["ip", "link", "del", dev], capture_output=True, check=False)

    def driver(self, **kw: object) -> SshSwitchDriver:
        args: dict[str, object] = {
            "host": self.sshd.host,
            "port": self.sshd.port,
            "username": self.sshd.username,
            "key_filename": str(self.sshd.client_key),
            "known_hosts": str(self.sshd.known_hosts),
            "dialect": "ovs",
            "switch": "leaf1",
            "quarantine_vlan": Q,
            "command_prefix": f"ovs-vsctl --db={self.ovs.remote}",
            "bridge": self.bridge,
        }
        args.update(kw)
        return SshSwitchDriver(**args)  # type: ignore[arg-type]

    def tag_of(self, port: str) -> str:
        return self.ovs.vsctl("get", "port", port, "tag").strip()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    lab = Lab(tmp_path_factory.mktemp("sshovs"))
    try:
        lab.start()
        yield lab
    finally:
        lab.stop()


def access(port: str, vlan: int) -> EthernetPortConfig:
    return EthernetPortConfig("leaf1", port, PortMode.ACCESS, VlanId(vlan))


def test_fifty_ports_in_one_batch_use_exactly_one_ssh_session(lab: Lab) -> None:
    before = lab.sshd.accepted()
    desired = [access(p, 100 + i) for i, p in enumerate(lab.ports[:50])]
    with lab.driver() as drv:
        drv.apply(desired)
        assert lab.sshd.accepted() - before == 1  # server-side count
        state = drv.observe()  # reuses the same connection
        assert lab.sshd.accepted() - before == 1
        assert drv.connections_opened == 1
    for want in desired:
        assert state.port(want.port) == want
    # and straight from OVSDB, not through the driver's parser
    assert lab.tag_of(lab.ports[0]) == "100"
    assert lab.tag_of(lab.ports[49]) == "149"


def test_connection_is_reused_across_batches(lab: Lab) -> None:
    before = lab.sshd.accepted()
    with lab.driver() as drv:
        for vlan in (300, 301, 302):
            drv.apply([access(p, vlan) for p in lab.ports[:5]])
        assert lab.tag_of(lab.ports[4]) == "302"
    assert lab.sshd.accepted() - before == 1


def test_trunk_native_trunk_and_shutdown_read_back_as_desired(lab: Lab) -> None:
    p = lab.ports[50:54]
    v = VlanId
    desired = [
        EthernetPortConfig("leaf1", p[0], PortMode.TRUNK, v(10), (v(20), v(30))),
        EthernetPortConfig("leaf1", p[1], PortMode.TRUNK, None, (v(40),)),
        EthernetPortConfig("leaf1", p[2], PortMode.SHUTDOWN),
        access(p[3], 11),
    ]
    with lab.driver() as drv:
        drv.apply(desired)
        state = drv.observe()
    assert [state.port(c.port) for c in desired] == desired
    assert lab.ovs.vsctl("get", "port", p[0], "vlan_mode").strip() == "native-untagged"
    assert lab.tag_of(p[2]) == str(Q)


def test_failing_batch_raises_apply_error_and_changes_nothing(lab: Lab) -> None:
    p = lab.ports[54]
    with lab.driver() as drv:
        drv.apply([access(p, 500)])
        with pytest.raises(ApplyError) as e:
            drv.apply([access(p, 501), access(f"{lab.tag}nope", 501)])
    err = e.value
    assert err.fabric == "ethernet"
    assert err.device == "leaf1"
    assert f"{lab.tag}nope" in err.fields["command"]
    assert "no row" in err.fields["output"]
    assert err.fields["status"] == 1
    assert lab.tag_of(p) == "500"  # one ovs-vsctl transaction: all or nothing


def test_port_map_translates_names_both_ways(lab: Lab) -> None:
    pm = {"gpu-a": lab.ports[55], "gpu-b": lab.ports[56]}
    with lab.driver(port_map=pm) as drv:
        drv.apply([access("gpu-a", 600), access("gpu-b", 601)])
        state = drv.observe()
    assert [(c.port, c.vlan) for c in state.ports] == [("gpu-a", VlanId(600)), ("gpu-b", VlanId(601))]
    assert lab.tag_of(lab.ports[55]) == "600"


def test_concurrent_batches_on_one_switch_all_land_over_one_connection(lab: Lab) -> None:
    before = lab.sshd.accepted()
    errors: list[BaseException] = []
    with lab.driver() as drv:

        def work(i: int) -> None:
            try:
                drv.apply([access(p, 700 + i) for p in lab.ports[i * 5 : i * 5 + 5]])
            except BaseException as e:  # collected and asserted below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        state = drv.observe()
    assert errors == []
    for i in range(4):
        for p in lab.ports[i * 5 : i * 5 + 5]:
            assert state.port(p) == access(p, 700 + i)
    assert lab.sshd.accepted() - before == 1


def test_reconnects_after_the_server_dropped_the_connection(lab: Lab) -> None:
    with lab.driver() as drv:
        drv.apply([access(lab.ports[57], 800)])
        before = lab.sshd.accepted()
        assert lab.sshd.drop_connections() >= 1  # the server side of the kept connection
        drv.apply([access(lab.ports[57], 801)])
        assert lab.sshd.accepted() - before == 1
        assert drv.connections_opened == 2
    assert lab.tag_of(lab.ports[57]) == "801"


def test_connect_retries_until_the_server_comes_up(tmp_path: Path, lab: Lab) -> None:
    late = SshServer(tmp_path / "late")
    late._write_files()  # keys exist before the server listens
    starter = threading.Timer(0.6, late.start)
    starter.start()
    try:
        drv = lab.driver(
            port=late.port,
            key_filename=str(late.client_key),
            known_hosts=str(late.known_hosts),
            retries=8,
            backoff=0.2,
        )
        drv.apply([access(lab.ports[58], 900)])
        assert drv.connection.attempts > 1
        assert late.accepted() == 1
        drv.close()
    finally:
        starter.join()
        late.stop()
    assert lab.tag_of(lab.ports[58]) == "900"


def test_refused_connection_gives_up_after_bounded_backoff(lab: Lab) -> None:
    sleeps: list[float] = []
    drv = lab.driver(port=free_port(), retries=4, backoff=0.1, sleep=sleeps.append)
    with pytest.raises(ApplyError) as e:
        drv.apply([access(lab.ports[59], 5)])
    assert sleeps == [0.1, 0.2, 0.4]
    assert e.value.fields["attempts"] == 4
    assert e.value.device == "leaf1"


def test_unknown_host_key_is_rejected_without_retry(tmp_path: Path, lab: Lab) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    drv = lab.driver(known_hosts=str(kh), retries=4, sleep=lambda s: None)
    with pytest.raises(ApplyError) as e:
        drv.apply([access(lab.ports[59], 5)])
    assert "host key" in e.value.message
    assert drv.connection.attempts == 1


def test_shell_transport_runs_commands_from_stdin_and_detects_errors(tmp_path: Path, lab: Lab) -> None:
    """The prompt-less shell transport (vendor dialects) against a real sshd, with a test dialect."""
    log = tmp_path / "shell.log"
    dialect = dialect_from_dict(
        {
            "name": "test-shell",
            "transport": "shell",
            "parser": "ios",
            "templates": {
                "begin": f"echo begin >> {log}",
                "access": f"echo interface {{port}} access {{vlan}} >> {log}",
                "quarantine": "test {port} != bad || echo '% Invalid input (at token 1: bad)'",
                "end": f"echo end >> {log}",
                "read": "printf 'interface Ethernet1\\n   switchport access vlan 42\\n'",
            },
            "errors": ["^% Invalid"],
        }
    )
    with lab.driver(dialect=dialect, command_prefix=None) as drv:
        drv.apply([access("Ethernet1", 42), access("Ethernet2", 43)])
        assert log.read_text().splitlines() == [
            "begin",
            "interface Ethernet1 access 42",
            "interface Ethernet2 access 43",
            "end",
        ]
        assert drv.observe().ports == (access("Ethernet1", 42),)
        with pytest.raises(ApplyError) as e:
            drv.apply([EthernetPortConfig("leaf1", "bad", PortMode.SHUTDOWN)])
    assert "% Invalid input" in e.value.message
    assert os.path.exists(log)
