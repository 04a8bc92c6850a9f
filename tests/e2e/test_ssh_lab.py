"""The lab's Ethernet driven over SSH (the ``ssh`` driver, Linux+OVS dialect, through a
local sshd on 127.0.0.1): a move works end to end; an SSH timeout during a move gives one
clear error, leaves the node in quarantine or its old tenant, and a retry converges."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest
import yaml

from gpufabric.lab.sshd import SshServer

from e2e.conftest import LabEnv, owner_of_ports
from e2e.test_faults import failed_move
from e2e.test_move import nets_of

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def sshd(lab: LabEnv) -> Iterator[SshServer]:
    """Point the lab's fabrics.yaml Ethernet entries at an sshd fronting the lab's OVS."""
    server = SshServer(lab.home / "sshd")
    server.start()
    path = lab.home / "fabrics.yaml"
    cfg = yaml.safe_load(path.read_text())
    remote = cfg["ethernet"][0]["options"]["remote"]
    cfg["ethernet"] = [
        {"driver": "ssh", "options": {
            "host": server.host, "port": server.port, "username": server.username,
            "key_filename": str(server.client_key), "known_hosts": str(server.known_hosts), "dialect": "ovs",
            "switch": e["options"]["switch"], "bridge": e["options"]["switch"], "quarantine_vlan": 4000,
            "command_prefix": f"ovs-vsctl --db={remote}", "connect_timeout": 3.0, "command_timeout": 10.0,
            "retries": 1}}
        for e in cfg["ethernet"]
    ]  # fmt: skip
    path.write_text(yaml.safe_dump(cfg))
    yield server
    server.stop()


def test_move_over_ssh_then_ssh_timeout_then_retry(lab: LabEnv, sshd: SshServer) -> None:
    nets = nets_of(lab)
    before = sshd.accepted()
    lab.gfj("node", "move", "gpu-a01", "--to-tenant", "alpha")
    assert owner_of_ports(lab, "gpu-a01", nets) == {"alpha"}
    assert sshd.accepted() > before  # the Ethernet side really went over SSH

    pid = sshd.pid
    assert pid is not None
    sshd.drop_connections()
    os.kill(pid, signal.SIGSTOP)  # accepts TCP, never answers: an SSH timeout
    try:
        line, move = failed_move(lab, "gpu-a01", "beta")
        assert "ssh" in line.lower() or "ethernet" in line.lower() or "timed out" in line.lower(), line
        assert owner_of_ports(lab, "gpu-a01", nets) <= {"alpha", "quarantine"}
    finally:
        os.kill(pid, signal.SIGCONT)
    done = lab.gfj("move", "retry", str(move["id"]))
    assert done["moves"][0]["status"] == "done"
    assert owner_of_ports(lab, "gpu-a01", nets) == {"beta"}


def test_host_key_checking_off_only_when_explicit_and_then_reported(lab: LabEnv, sshd: SshServer) -> None:
    path = lab.home / "fabrics.yaml"
    strict = path.read_text()
    cfg = yaml.safe_load(strict)
    try:
        for e in cfg["ethernet"]:
            del e["options"]["known_hosts"]
        path.write_text(yaml.safe_dump(cfg))
        p = lab.gf("audit", check=False)  # neither known_hosts nor insecure: refused, one line
        assert p.returncode == 2 and "known_hosts" in p.stderr and p.stderr.count("\n") == 1, p.stderr
        for e in cfg["ethernet"]:
            e["options"]["insecure"] = True
        path.write_text(yaml.safe_dump(cfg))
        p = lab.gf("audit", "--json", check=False)
        found = yaml.safe_load(p.stdout)["violations"]
        assert p.returncode == 1
        assert {(v["invariant"], v["device"]) for v in found} == {
            ("TRANSPORT-INSECURE", e["options"]["switch"]) for e in cfg["ethernet"]
        }
    finally:
        path.write_text(strict)
    assert lab.gf("audit", check=False).returncode == 0
