"""Files holding secrets that gpufabric reads besides the ``*_file`` secrets: the DPU kind's
kubeconfig, and the OpenSM config holding sm_key/m_key (locally, or on an SM host over SSH).
Each one group or others may read is refused with one line naming the field and the mode
required, unless ``insecure: true``, which the audit reports (``TRANSPORT-INSECURE``).
serve's ``--tls-key``: tests/unit/test_principals.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpufabric.domain.errors import ConfigError
from gpufabric.fabrics.dpu.drivers.k8s.nodes import K8sNodeDriver
from gpufabric.fabrics.infiniband.audit.hardening import check_hardening
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMConfig, OpenSMDriver

from fabrics.infiniband.unit.test_ib_smhosts import host

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: kube-secret-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""
HARDENED = "sm_priority 15\nsm_key 0x5ec2e7c0ffee0001\nsa_key 0x5a5a5a5a00c0ffee\nm_key 0x3c3c3c3cdeadbeef\n"
LOOSE = [0o644, 0o640, 0o604, 0o660]
OWNER_ONLY = "mode 0600 or stricter (chmod 600): not readable by group or others"


def kubeconfig(tmp_path: Path, mode: int) -> Path:
    p = tmp_path / "kubeconfig"
    p.write_text(KUBECONFIG)
    p.chmod(mode)
    return p


def one_line_naming(e: ConfigError, field: str, mode: int) -> None:
    assert e.field == field
    assert str(e).count("\n") == 0 and f"(mode {mode:04o})" in str(e) and OWNER_ONLY in str(e)


@pytest.mark.parametrize("mode", LOOSE, ids=lambda m: f"{m:04o}")
def test_a_kubeconfig_others_may_read_is_refused(tmp_path: Path, mode: int) -> None:
    with pytest.raises(ConfigError) as ei:
        K8sNodeDriver.from_section({"kubeconfig": str(kubeconfig(tmp_path, mode))})
    one_line_naming(ei.value, "dpu.kubernetes.kubeconfig", mode)
    assert "kube-secret-token" not in str(ei.value)


def test_a_private_kubeconfig_is_read_and_an_insecure_one_reported(tmp_path: Path) -> None:
    ok = K8sNodeDriver.from_section({"kubeconfig": str(kubeconfig(tmp_path, 0o600))})
    assert ok.host == "https://127.0.0.1:6443" and ok.transport_notes() == ()
    loose = K8sNodeDriver.from_section({"kubeconfig": str(kubeconfig(tmp_path, 0o644)), "insecure": True})
    assert [(n.device, n.setting) for n in loose.transport_notes()] == [("kubernetes", "insecure")]
    assert "kubeconfig" in loose.transport_notes()[0].message and "readable by group or others" in loose.transport_notes()[0].message
    with pytest.raises(ConfigError) as ei:
        K8sNodeDriver.from_section({"kubeconfig": str(kubeconfig(tmp_path, 0o600)), "insecure": "yes"})
    assert ei.value.field == "dpu.kubernetes.insecure"


def opensm(tmp_path: Path, text: str, mode: int, **over: Any) -> OpenSMDriver:
    conf = tmp_path / "opensm.conf"
    conf.write_text(text)
    conf.chmod(mode)
    opts = {"partitions_conf": str(tmp_path / "p.conf"), "log_path": str(tmp_path / "l"), "opensm_conf": str(conf)}
    return OpenSMDriver(OpenSMConfig.from_options(opts | over))


@pytest.mark.parametrize("mode", LOOSE, ids=lambda m: f"{m:04o}")
def test_an_opensm_conf_with_keys_others_may_read_is_refused_at_load(tmp_path: Path, mode: int) -> None:
    with pytest.raises(ConfigError) as ei:
        opensm(tmp_path, HARDENED, mode)
    one_line_naming(ei.value, "infiniband.options.opensm_conf", mode)
    assert "3c3c3c3cdeadbeef" not in str(ei.value)


def test_an_opensm_conf_without_keys_or_private_is_read(tmp_path: Path) -> None:
    assert dict(opensm(tmp_path, HARDENED, 0o600).settings())["m_key"] == "0x3c3c3c3cdeadbeef"
    assert dict(opensm(tmp_path, "sm_priority 15\nsm_key 0x1\n", 0o644).settings())["sm_priority"] == "15"


def test_an_insecure_opensm_conf_is_read_and_reported(tmp_path: Path) -> None:
    drv = opensm(tmp_path, HARDENED, 0o644, insecure=True)
    assert dict(drv.settings())["sm_key"] == "0x5ec2e7c0ffee0001"
    assert [(n.device, n.setting) for n in drv.transport_notes()] == [("opensm", "insecure")]
    assert str(tmp_path / "opensm.conf") in drv.transport_notes()[0].message
    with pytest.raises(ConfigError) as ei:
        opensm(tmp_path, HARDENED, 0o600, insecure="yes")
    assert ei.value.field == "infiniband.options.insecure"


def test_an_opensm_conf_made_readable_after_load_is_not_read(tmp_path: Path) -> None:
    """observe reads the settings every pass: a file chmod'ed 0644 since is refused then,
    and the hardening audit says why (IB-HARD-UNREADABLE naming the field and the mode)."""
    drv = opensm(tmp_path, HARDENED, 0o600)
    (tmp_path / "opensm.conf").chmod(0o644)
    settings = dict(drv.settings())
    assert "m_key" not in settings
    [finding] = check_hardening(settings)
    assert finding.id == "IB-HARD-UNREADABLE" and "infiniband.options.opensm_conf" in finding.observed
    assert OWNER_ONLY in finding.observed and "(mode 0644)" in finding.observed


def test_the_mode_of_an_opensm_conf_on_an_sm_host_is_read_over_ssh(tmp_path: Path) -> None:
    from gpufabric.fabrics.infiniband.drivers.opensm.checks import conf_mode_ok

    sm = host(tmp_path, "sm-a")
    conf = tmp_path / "sm-a" / "opensm.conf"
    conf.write_text(HARDENED)
    conf.chmod(0o644)
    mode = sm.mode(conf)
    assert mode is not None and mode & 0o777 == 0o644
    assert sm.mode(tmp_path / "sm-a" / "missing") is None
    where = Path(f"sm-a:{conf}")
    with pytest.raises(ConfigError) as ei:
        conf_mode_ok(where, {"m_key": "0x3c3c3c3cdeadbeef"}, mode, insecure=False)
    one_line_naming(ei.value, "infiniband.options.opensm_conf", 0o644)
    assert conf_mode_ok(where, {"m_key": "0x3c3c3c3cdeadbeef"}, mode, insecure=True) is False
    conf.chmod(0o600)
    assert conf_mode_ok(where, {"m_key": "0x3c3c3c3cdeadbeef"}, sm.mode(conf), insecure=False) is True
