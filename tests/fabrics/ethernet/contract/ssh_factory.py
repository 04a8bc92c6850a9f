"""Contract target for SshSwitchDriver (``ovs`` dialect): a local sshd on 127.0.0.1 in
front of a private OVS; the driver runs ``ovs-vsctl --db=unix:<private socket>`` over SSH."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpufabric.fabrics.ethernet.drivers.ssh.driver import SshSwitchDriver
from gpufabric.lab.ovs import OvsServer
from gpufabric.lab.sshd import SshServer

from fabrics.ethernet.contract.ethernet_targets import MIN_PORTS, QUARANTINE_VLAN, EthernetTarget


@contextmanager
def ssh_target(run_dir: Path) -> Iterator[EthernetTarget]:
    prefix = "gk" + secrets.token_hex(2)
    bridge = f"{prefix}br"
    ports = tuple(f"{prefix}p{i:02d}" for i in range(MIN_PORTS))
    ovs = OvsServer(run_dir / "ovs", netns=f"{prefix}-ovs")
    sshd = SshServer(run_dir / "ssh")
    ovs.start()
    try:
        ovs.add_bridge(bridge, ports)
        sshd.start()
        with SshSwitchDriver(
            host=sshd.host,
            port=sshd.port,
            username=sshd.username,
            key_filename=str(sshd.client_key),
            known_hosts=str(sshd.known_hosts),
            dialect="ovs",
            switch=bridge,
            quarantine_vlan=QUARANTINE_VLAN,
            command_prefix=f"ovs-vsctl --db={ovs.remote}",
            bridge=bridge,
        ) as driver:
            yield EthernetTarget(driver, ports)
    finally:
        try:
            sshd.stop()
            ovs.vsctl("--if-exists", "del-br", bridge)
        finally:
            ovs.stop()
