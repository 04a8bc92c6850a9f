"""The shared SSH runner (gpufabric.transport.sshrun) against a real sshd on 127.0.0.1 (lab.sshd).

A host key that is unknown or does not match known_hosts is refused during key exchange: the
server logs no accepted session and the command (which would create a marker file) never runs,
and it is not retried. ``insecure`` with no known_hosts connects and is reported; neither is a
ConfigError. Commands return (status, stdout, stderr); a dropped connection is reopened.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufabric.domain.errors import ApplyError, ConfigError, FabricError
from gpufabric.lab.sshd import SshServer, free_port
from gpufabric.transport.sshrun import REASONS, SshHost, SshPeer, SshSession, check_known_host

pytestmark = pytest.mark.root

PEER = SshPeer("SM host sm-09:", "infiniband", "sm-09", fields={"sm_host": "sm-09"})


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    with SshServer(tmp_path_factory.mktemp("sshrun")) as s:
        yield s


def host(s: SshServer, known_hosts: Path | None, **kw: object) -> SshHost:
    return SshHost(s.host, s.port, s.username, str(s.client_key), str(known_hosts) if known_hosts else None,
                   connect_timeout=5, **kw)  # type: ignore[arg-type]  # fmt: skip


def other_key(tmp: Path, s: SshServer) -> Path:
    """A known_hosts file holding a key for the server's address that is not its host key."""
    key = tmp / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    kh = tmp / "known_hosts_other"
    kh.write_text(f"[{s.host}]:{s.port} " + " ".join(key.with_suffix(".pub").read_text().split()[:2]) + "\n")
    return kh


def test_known_host_runs_a_command_with_stdin_and_returns_status_stdout_stderr(sshd: SshServer) -> None:
    sess = SshSession(host(sshd, sshd.known_hosts), PEER)
    try:
        assert sess.run("cat; echo oops >&2; exit 3", b"from stdin\n", timeout=10) == (3, "from stdin\n", "oops\n")
        assert sess.run("echo again", timeout=10) == (0, "again\n", "")
        assert (sess.connects, sess.attempts) == (1, 1)  # one kept connection
        assert host(sshd, sshd.known_hosts).insecure_notes("sm-09", "ssh.insecure", "SSH to sm-09") == ()
    finally:
        sess.close()


@pytest.mark.parametrize("case", ["unknown", "mismatch"])
def test_refused_host_key_runs_nothing_and_is_not_retried(sshd: SshServer, tmp_path: Path, case: str) -> None:
    if case == "unknown":
        kh = tmp_path / "known_hosts"
        kh.write_text("")
    else:
        kh = other_key(tmp_path, sshd)
    marker = tmp_path / "ran"
    before = sshd.accepted()
    sess = SshSession(host(sshd, kh, retries=3), PEER, sleep=lambda s: pytest.fail("a refused key is not retried"))
    with pytest.raises(ApplyError) as ei:
        sess.run(f"touch {marker}", timeout=10)
    reason = {"unknown": "host-key-unknown", "mismatch": "host-key-mismatch"}[case]
    says = {"unknown": "is unknown", "mismatch": "does not match known_hosts"}[case]
    f = ei.value.fields
    assert (f["reason"], f["host"], f["port"], f["sm_host"], ei.value.device) == (
        reason, "127.0.0.1", sshd.port, "sm-09", "sm-09")  # fmt: skip
    assert ei.value.message.startswith(f"SM host sm-09: SSH host key of 127.0.0.1:{sshd.port} {says}")
    assert "nothing run" in ei.value.message and "\n" not in ei.value.message
    assert reason in REASONS
    assert not marker.exists()  # the command never ran
    assert sshd.accepted() == before  # never authenticated
    assert (sess.attempts, sess.connects) == (1, 0)


def test_insecure_without_known_hosts_connects_and_is_reported(sshd: SshServer, tmp_path: Path) -> None:
    h = host(sshd, None, insecure=True)
    sess = SshSession(h, SshPeer("SSH to the DPU of gpu-a01:", "dpu", "gpu-a01", FabricError))
    try:
        assert sess.run(f"touch {tmp_path / 'ran'}; echo ok", timeout=10) == (0, "ok\n", "")
    finally:
        sess.close()
    assert (tmp_path / "ran").exists()
    notes = h.insecure_notes("gpu-a01", "ssh.insecure", "SSH to the DPU of gpu-a01")
    assert [(n.device, n.setting, n.message) for n in notes] == [
        ("gpu-a01", "ssh.insecure", f"SSH to the DPU of gpu-a01 at 127.0.0.1:{sshd.port}: host key not checked (insecure: true)")
    ]  # fmt: skip


def test_neither_known_hosts_nor_insecure_is_a_config_error_before_connecting(sshd: SshServer) -> None:
    before = sshd.accepted()
    with pytest.raises(ConfigError) as ei:
        SshSession(host(sshd, None), PEER).run("true")
    assert ei.value.field == "known_hosts" and "insecure: true" in ei.value.message
    assert sshd.accepted() == before


def test_unreachable_retries_with_bounded_backoff_then_names_host_and_attempts() -> None:
    sleeps: list[float] = []
    h = SshHost("127.0.0.1", free_port(), "nobody", "/nonexistent", "/dev/null", retries=4, backoff=0.1,
                backoff_max=0.3, connect_timeout=2)  # fmt: skip
    with pytest.raises(ApplyError) as ei:
        SshSession(h, SshPeer("switch leaf9:", "ethernet", "leaf9"), sleep=sleeps.append).run("true")
    assert sleeps == [0.1, 0.2, 0.3]
    assert (ei.value.fields["reason"], ei.value.fields["attempts"], ei.value.device) == ("unreachable", 4, "leaf9")
    assert ei.value.message.startswith(f"switch leaf9: cannot connect to 127.0.0.1:{h.port} over SSH after 4 attempts")


def test_command_timeout_and_dropped_connection(sshd: SshServer) -> None:
    sess = SshSession(host(sshd, sshd.known_hosts), PEER)
    try:
        with pytest.raises(ApplyError) as ei:
            sess.run("sleep 5", timeout=0.5)
        assert (ei.value.fields["reason"], ei.value.fields["command"]) == ("command", "sleep 5")
        assert ei.value.message.startswith("SM host sm-09: command failed over SSH")
        sshd.drop_connections()
        assert sess.run("echo back", timeout=10) == (0, "back\n", "")
        assert sess.connects == 2  # reopened once
    finally:
        sess.close()


def test_check_known_host_refuses_a_host_without_a_key_when_loading(sshd: SshServer, tmp_path: Path) -> None:
    check_known_host(host(sshd, sshd.known_hosts), "x.known_hosts")  # holds the key: no error
    empty = tmp_path / "kh"
    empty.write_text("")
    with pytest.raises(ConfigError) as ei:
        check_known_host(host(sshd, empty), "x.known_hosts")
    assert ei.value.field == "x.known_hosts" and f"[127.0.0.1]:{sshd.port}" in ei.value.message


def test_the_prefix_says_ssh_once() -> None:
    h = SshHost("10.0.0.1", 22, "root", "/k")
    assert PEER.fail(h, "auth", "authentication failed").message == "SM host sm-09: SSH authentication failed"
    dpu = SshPeer("SSH to the DPU of n1:", "dpu", "n1", FabricError)
    err = dpu.fail(h, "auth", "authentication failed")
    assert (type(err), err.message, err.fields["host"]) == (FabricError, "SSH to the DPU of n1: authentication failed", "10.0.0.1")
