"""An SM host over a real sshd (lab.sshd): the host key is checked before anything is written.

The 'SM host' is this machine through a private sshd on 127.0.0.1; a known_hosts file that
holds another key, or no key for it, is refused at connect time and the partitions file is
never created. With the right key, the atomic write's sha256 is read back from the host.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufabric.domain.errors import ApplyError, ConfigError
from gpufabric.fabrics.infiniband.drivers.opensm.hosts import SmHostConfig, SshSmHost
from gpufabric.lab.sshd import SshServer

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    with SshServer(tmp_path_factory.mktemp("smssh")) as s:
        yield s


def sm_host(s: SshServer, known_hosts: Path, conf: Path) -> SshSmHost:
    cfg = SmHostConfig("sm-02", s.host, s.port, s.username, s.client_key, known_hosts, conf, conf.with_name("log"),
                       pid_file=conf.with_name("pid"), connect_timeout=5)  # fmt: skip
    return SshSmHost(cfg)


def test_host_key_mismatch_is_refused_before_anything_is_written(sshd: SshServer, tmp_path: Path) -> None:
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[{sshd.host}]:{sshd.port} " + " ".join(other.with_suffix(".pub").read_text().split()[:2]) + "\n")
    conf = tmp_path / "sm" / "partitions.conf"
    before = sshd.accepted()
    h = sm_host(sshd, kh, conf)
    with pytest.raises(ApplyError) as ei:
        h.write(conf, "Default=0x7fff : ALL=full ;\n")
    assert ei.value.message.startswith("SM host sm-02: SSH host key of")
    assert "does not match" in ei.value.message
    assert ei.value.fields["sm_host"] == "sm-02"
    assert not conf.parent.exists()  # nothing written, not even the directory
    assert sshd.accepted() == before  # never authenticated


def test_unknown_host_key_is_refused_when_the_configuration_loads(sshd: SshServer, tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(sshd.known_hosts.read_text().replace(f":{sshd.port} ", f":{sshd.port + 1} "))  # another port's key
    conf = tmp_path / "sm" / "partitions.conf"
    with pytest.raises(ConfigError) as ei:
        sm_host(sshd, kh, conf)
    assert ei.value.field == "infiniband.options.sm_hosts[sm-02].known_hosts"
    assert f"[{sshd.host}]:{sshd.port}" in ei.value.message and "\n" not in ei.value.message
    assert not conf.parent.exists()


def test_a_key_removed_after_loading_is_refused_at_connect(sshd: SshServer, tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(sshd.known_hosts.read_text())
    conf = tmp_path / "sm" / "partitions.conf"
    h = sm_host(sshd, kh, conf)
    kh.write_text("")
    with pytest.raises(ApplyError) as ei:
        h.write(conf, "x\n")
    assert ei.value.message.startswith("SM host sm-02: SSH host key of") and "is unknown" in ei.value.message
    assert not conf.parent.exists()


def test_known_host_key_atomic_write_and_checksum_read_back(sshd: SshServer, tmp_path: Path) -> None:
    conf = tmp_path / "sm" / "partitions.conf"
    h = sm_host(sshd, sshd.known_hosts, conf)
    try:
        text = "Default=0x7fff, ipoib : ALL_CAS=limited, SELF=full ;\n"
        assert h.write(conf, text) == hashlib.sha256(text.encode()).hexdigest()
        assert conf.read_text() == text
        assert h.read(conf) == text and h.read(tmp_path / "none") is None
        assert h.checksum(tmp_path / "none") is None
        conf.with_name("log").write_text("a\nSUBNET UP\n")
        assert h.size(conf.with_name("log")) == 12
        assert h.read_from(conf.with_name("log"), 2) == "SUBNET UP\n"
        assert sorted(p.name for p in conf.parent.iterdir()) == ["log", "partitions.conf"]  # no temp file left
    finally:
        h.close()
