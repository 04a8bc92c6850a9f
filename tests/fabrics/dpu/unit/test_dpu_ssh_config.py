"""``dpu.offload.<host>.ssh``: checked field by field (one-line ConfigError naming the field),
strict host-key checking unless ``insecure: true`` is explicit, the private key a 0600 secret."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpufabric.domain.errors import ConfigError
from gpufabric.fabrics.dpu.drivers.host.ovs import DpuOvsDriver
from gpufabric.fabrics.dpu.drivers.host.sshrun import SshRunner
from gpufabric.fabrics.dpu.drivers.k8s.nodes import K8sNodeDriver
from gpufabric.fabrics.dpu.drivers.ovn.northbound import OvnNbDriver
from gpufabric.fabrics.dpu.kind import DpuKind

DRIVERS: dict[str, type] = {"dpu-ovsdb": DpuOvsDriver, "ovn-nb": OvnNbDriver, "k8s-nodes": K8sNodeDriver}
F = "dpu.offload.gpu-a01.ssh"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    key, kh, loose = tmp_path / "id", tmp_path / "known_hosts", tmp_path / "id_loose"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n")
    key.chmod(0o600)
    loose.write_text("k")
    loose.chmod(0o644)
    kh.write_text("")
    return {"key_file": str(key), "known_hosts": str(kh), "loose": str(loose)}


def _build(ssh: Any) -> Any:
    section = {"ovn_nb": "unix:/nb.sock", "ovsdb": {"gpu-a01": "unix:/x.sock"},
               "offload": {"gpu-a01": {"appctl": "/run/ovs.ctl", "ssh": ssh}}}  # fmt: skip
    return DpuKind().build(section, DRIVERS.__getitem__, {})


def test_ok_builds_a_runner_and_keeps_the_source(files: dict[str, str]) -> None:
    b = _build({"host": "192.0.2.21", "user": "root", "key_file": files["key_file"], "known_hosts": files["known_hosts"]})
    r = b.offload_ssh["gpu-a01"]
    assert isinstance(r, SshRunner) and (r.host, r.port, r.user, r.insecure) == ("192.0.2.21", 22, "root", False)
    assert b.offload == {"gpu-a01": {"appctl": "/run/ovs.ctl", "netns": ""}} and b.transport_notes() == ()


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"colour": 1}, f"{F}.colour"),
        ({"host": ""}, f"{F}.host"),
        ({"user": None}, f"{F}.user"),
        ({"port": 0}, f"{F}.port"),
        ({"port": True}, f"{F}.port"),
        ({"known_hosts": None}, f"{F}.known_hosts"),  # neither known_hosts nor insecure
        ({"known_hosts": "/nonexistent/kh"}, f"{F}.known_hosts"),
        ({"insecure": True}, f"{F}.insecure"),  # with known_hosts: contradictory
        ({"insecure": "yes", "known_hosts": None}, f"{F}.insecure"),
        ({"key_file": "LOOSE"}, f"{F}.key_file"),  # group/other-readable private key
    ],
)
def test_bad_ssh_is_refused_naming_the_field(files: dict[str, str], over: dict[str, Any], field: str) -> None:
    ssh = {"host": "192.0.2.21", "user": "root", "key_file": files["key_file"], "known_hosts": files["known_hosts"]}
    ssh |= {k: files["loose"] if v == "LOOSE" else v for k, v in over.items()}
    ssh = {k: v for k, v in ssh.items() if v is not None or k in ("host", "user")}
    with pytest.raises(ConfigError) as ei:
        _build(ssh)
    assert ei.value.field == field and "\n" not in str(ei.value)


def test_ssh_not_a_mapping(files: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as ei:
        _build("root@dpu")
    assert ei.value.field == F
