"""Transport configuration, checked at load and reported by the audit (no I/O here; the real
TLS connections are in tests/functional/test_ovsdb_tls.py):

- TLS client files for OVSDB/OVN ``ssl:`` remotes: all three, readable PEM, key mode 0600;
  ``ssl:`` without them, or them without ``ssl:``, refused with the field named;
- ``TRANSPORT-INSECURE`` notes, as values: OVSDB/OVN ``tcp:`` remotes (``unix:``/``ssl:`` are
  fine), Kubernetes ``verify_ssl: false`` or ``http://`` off loopback, Fabric Manager over TCP;
- the Kubernetes ``token_file`` is a secret file (0600) like every other.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.findings import Violation
from gpufabric.domain.severity import Severity
from gpufabric.engine.audit_run import audit, transport_violations
from gpufabric.engine.fabrics import Fabrics
from gpufabric.engine.moves import MoveEngine
from gpufabric.fabrics.dpu.drivers.host.ovs import DpuOvsDriver
from gpufabric.fabrics.dpu.drivers.k8s.nodes import K8sNodeDriver
from gpufabric.fabrics.dpu.drivers.ovn.northbound import OvnNbDriver
from gpufabric.fabrics.dpu.kind import DpuKind
from gpufabric.fabrics.ethernet.drivers.ovsdb.driver import OvsdbSwitchDriver
from gpufabric.fabrics.ethernet.drivers.ovsdb.pool import OvsdbPool
from gpufabric.fabrics.nvlink.backend import FmpmDriver
from gpufabric.store.core import Store
from gpufabric.store.registry import Registry
from gpufabric.transport.secrets import TlsFiles, TransportNote, load_tls, plain_remote_notes, remote_methods

from support import drivers
from support.memfabric import register
from unit import test_engine_memory as memory_engine

DRIVERS: dict[str, type] = {"dpu-ovsdb": DpuOvsDriver, "ovn-nb": OvnNbDriver, "k8s-nodes": K8sNodeDriver}
TCP_NOTE = "over plain tcp: unencrypted, any client reaching the port may read and write it"


def _pem(tmp: Path, name: str, cn: str = "t") -> tuple[Path, Path]:
    key, cert = tmp / f"{name}.key", tmp / f"{name}.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", f"/CN={cn}"],
                   check=True, capture_output=True)  # fmt: skip
    key.chmod(0o600)
    return key, cert


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("tls")
    key, cert = _pem(d, "client")
    key2, cert2 = _pem(d, "other")
    return {"private_key": str(key), "certificate": str(cert), "ca_cert": str(cert),
            "key2": str(key2), "cert2": str(cert2)}  # fmt: skip


def tls_opts(files: dict[str, str]) -> dict[str, str]:
    return {k: files[k] for k in ("private_key", "certificate", "ca_cert")}


# ------------------------------------------------------------------ TLS files
def test_load_tls_gives_absolute_paths(files: dict[str, str]) -> None:
    t = load_tls("dpu.tls.", **tls_opts(files))
    assert t == TlsFiles(files["private_key"], files["certificate"], files["ca_cert"])
    assert t.cli_args() == (f"--private-key={files['private_key']}", f"--certificate={files['certificate']}",
                            f"--ca-cert={files['ca_cert']}")  # fmt: skip
    assert load_tls("x.") is None


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [({"ca_cert": None}, "dpu.tls.ca_cert", "all three"),
     ({"private_key": None, "certificate": None}, "dpu.tls.private_key", "all three"),
     ({"certificate": "/nonexistent/cert.pem"}, "dpu.tls.certificate", "No such file"),
     ({"ca_cert": "/tmp"}, "dpu.tls.ca_cert", "regular"),
     ({"private_key": "CERT"}, "dpu.tls.private_key", "PEM private key"),
     ({"certificate": "KEY"}, "dpu.tls.certificate", "PEM certificate"),
     ({"ca_cert": 5}, "dpu.tls.ca_cert", "a path")],
    ids=["missing-ca", "only-ca", "cert-missing", "ca-is-dir", "cert-as-key", "key-as-cert", "not-a-string"],
)  # fmt: skip
def test_load_tls_refuses(files: dict[str, str], change: dict[str, Any], field: str, says: str) -> None:
    given: dict[str, Any] = tls_opts(files)
    for k, v in change.items():
        given[k] = {"CERT": files["certificate"], "KEY": files["private_key"]}.get(v, v) if isinstance(v, str) else v
    with pytest.raises(ConfigError) as ei:
        load_tls("dpu.tls.", **given)
    assert ei.value.field == field and says in str(ei.value) and "\n" not in str(ei.value)


def test_key_must_match_the_certificate_and_be_unencrypted(files: dict[str, str], tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as ei:
        load_tls("dpu.tls.", files["key2"], files["certificate"], files["ca_cert"])
    assert ei.value.field == "dpu.tls.certificate" and "KEY_VALUES_MISMATCH" in str(ei.value)
    enc = tmp_path / "enc.key"
    subprocess.run(["openssl", "pkey", "-in", files["private_key"], "-aes256", "-passout", "pass:pw", "-out", str(enc)],
                   check=True, capture_output=True)  # fmt: skip
    enc.chmod(0o600)
    with pytest.raises(ConfigError) as ei:
        load_tls("", str(enc), files["certificate"], files["ca_cert"])
    assert ei.value.field == "private_key" and "unencrypted" in str(ei.value)


def test_private_key_must_be_owner_only(tmp_path: Path) -> None:
    key, cert = _pem(tmp_path, "k")
    key.chmod(0o640)
    with pytest.raises(ConfigError) as ei:
        load_tls("", str(key), str(cert), str(cert))
    assert ei.value.field == "private_key" and "0640" in str(ei.value) and "0600" in str(ei.value)


# ------------------------------------------------------------------ Ethernet OVSDB driver options
def test_ovsdb_driver_takes_tls_for_ssl(files: dict[str, str]) -> None:
    d = OvsdbSwitchDriver("leaf-1", "ssl:192.0.2.1:6640", 4000, **tls_opts(files))
    assert d.tls == load_tls("", **tls_opts(files)) and d.pool.tls == d.tls
    assert d.transport_notes() == ()


@pytest.mark.parametrize(
    ("remote", "tls", "field"),
    [("ssl:192.0.2.1:6640", False, "private_key"), ("tcp:192.0.2.1:6640", True, "private_key"),
     ("unix:/run/db.sock", True, "private_key"), ("ptcp:6640", False, "remote"), ("db.sock", False, "remote")],
    ids=["ssl-without-files", "files-with-tcp", "files-with-unix", "passive-remote", "no-method"],
)  # fmt: skip
def test_ovsdb_driver_refuses(files: dict[str, str], remote: str, tls: bool, field: str) -> None:
    with pytest.raises(ConfigError) as ei:
        OvsdbSwitchDriver("leaf-1", remote, 4000, **(tls_opts(files) if tls else {}))
    assert ei.value.field == field


def test_one_pool_has_one_tls_identity(files: dict[str, str]) -> None:
    pool = OvsdbPool()
    OvsdbSwitchDriver("leaf-1", "ssl:192.0.2.1:6640", 4000, pool=pool, **tls_opts(files))
    OvsdbSwitchDriver("leaf-2", "ssl:192.0.2.2:6640", 4000, pool=pool, **tls_opts(files))  # the same: fine
    with pytest.raises(ConfigError) as ei:
        OvsdbSwitchDriver("leaf-3", "ssl:192.0.2.3:6640", 4000, pool=pool, private_key=files["key2"],
                          certificate=files["cert2"], ca_cert=files["ca_cert"])  # fmt: skip
    assert ei.value.field == "private_key" and "leaf-3" in str(ei.value)


def test_fabrics_yaml_ethernet_options_reach_the_driver(files: dict[str, str]) -> None:
    reg = Registry.from_entry_points()
    entry = {"driver": "ovsdb", "options": {"switch": "leaf-1", "remote": "ssl:192.0.2.1:6640", **tls_opts(files)}}
    tcp = {"driver": "ovsdb", "options": {"switch": "leaf-2", "remote": "tcp:192.0.2.2:6640"}}
    f = Fabrics.from_config({"ethernet": [entry, tcp]}, reg)
    assert drivers.switches(f)["leaf-1"].tls == load_tls("", **tls_opts(files))  # type: ignore[attr-defined]
    assert [v.device for v in transport_violations(f.backends.items())] == ["leaf-2"]
    other = {"driver": "ovsdb", "options": {"switch": "leaf-3", "remote": "ssl:192.0.2.3:6640",
                                            "private_key": files["key2"], "certificate": files["cert2"],
                                            "ca_cert": files["ca_cert"]}}  # fmt: skip
    with pytest.raises(ConfigError) as ei:
        Fabrics.from_config({"ethernet": [entry, other]}, reg)
    assert ei.value.field == "private_key" and "same private_key/certificate/ca_cert" in str(ei.value)


@pytest.mark.parametrize(
    ("remote", "notes"),
    [("unix:/run/openvswitch/db.sock", ()), ("tcp:192.0.2.1:6640", ("tcp:192.0.2.1:6640",)),
     ("tcp:127.0.0.1:6640", ("tcp:127.0.0.1:6640",)),
     ("unix:/run/db.sock,tcp:192.0.2.1:6640, tcp:192.0.2.2:6640", ("tcp:192.0.2.1:6640", "tcp:192.0.2.2:6640"))],
    ids=["unix", "tcp", "tcp-loopback", "list"],
)  # fmt: skip
def test_ovsdb_tcp_remote_is_reported(remote: str, notes: tuple[str, ...]) -> None:
    d = OvsdbSwitchDriver("leaf-1", remote, 4000)
    assert d.transport_notes() == tuple(
        TransportNote("leaf-1", "remote", f"OVSDB of switch leaf-1 at {r} {TCP_NOTE} "
                      "(use ssl: with private_key/certificate/ca_cert)") for r in notes
    )  # fmt: skip


def test_remote_methods() -> None:
    assert remote_methods("unix:/a, ssl:h:1,tcp:h:2") == ("unix", "ssl", "tcp")
    assert plain_remote_notes("d", "ssl:h:1,unix:/x", "w") == ()


# ------------------------------------------------------------------ DPU section
OK: dict[str, Any] = {"ovn_nb": "unix:/run/ovn/nb.sock", "ovsdb": {"gpu-a01": "unix:/run/dpu/db.sock"}}


def test_dpu_ssl_remotes_get_the_section_tls(files: dict[str, str]) -> None:
    sec = {"ovn_nb": "ssl:192.0.2.5:6641", "ovsdb": {"gpu-a01": "ssl:192.0.2.11:6640", "gpu-a02": "unix:/run/x.sock"},
           "tls": tls_opts(files)}  # fmt: skip
    b: Any = DpuKind().build(sec, DRIVERS.__getitem__, {})
    tls = load_tls("", **tls_opts(files))
    assert (b.ovn.tls, b.ovs["gpu-a01"].tls, b.ovs["gpu-a02"].tls) == (tls, tls, None)
    assert b.transport_notes() == ()


@pytest.mark.parametrize(
    ("section", "field"),
    [(OK | {"ovn_nb": "ssl:192.0.2.5:6641"}, "dpu.tls"),
     (OK | {"ovsdb": {"gpu-a01": "ssl:192.0.2.11:6640"}}, "dpu.tls"),
     (OK | {"tls": "FILES"}, "dpu.tls"),
     (OK | {"tls": ["x"]}, "dpu.tls"),
     (OK | {"ovn_nb": "ssl:192.0.2.5:6641", "tls": {"key": "x"}}, "dpu.tls.key"),
     (OK | {"ovn_nb": "ssl:192.0.2.5:6641", "tls": {"private_key": "/nonexistent"}}, "dpu.tls.certificate")],
    ids=["ssl-nb-no-tls", "ssl-ovsdb-no-tls", "tls-without-ssl", "tls-not-mapping", "tls-unknown-key",
         "tls-incomplete"],
)  # fmt: skip
def test_dpu_tls_refused(files: dict[str, str], section: dict[str, Any], field: str) -> None:
    if section.get("tls") == "FILES":
        section = section | {"tls": tls_opts(files)}
    with pytest.raises(ConfigError) as ei:
        DpuKind().build(section, DRIVERS.__getitem__, {})
    assert ei.value.field == field


def test_dpu_driver_refuses_ssl_without_tls() -> None:
    with pytest.raises(ConfigError) as ei:
        DpuOvsDriver("gpu-a01", "ssl:192.0.2.11:6640")
    assert ei.value.field == "dpu.tls" and "dpu.ovsdb.gpu-a01" in str(ei.value)


def test_dpu_plain_transports_are_reported() -> None:
    sec = {"ovn_nb": "tcp:192.0.2.5:6641", "ovsdb": {"gpu-a01": "tcp:192.0.2.11:6640", "gpu-a02": "unix:/x.sock"},
           "kubernetes": {"host": "https://api.example:6443", "verify_ssl": False}}  # fmt: skip
    b: Any = DpuKind().build(sec, DRIVERS.__getitem__, {})
    assert [(n.device, n.setting) for n in b.transport_notes()] == [
        ("gpu-a01", "remote"), ("ovn-nb", "remote"), ("kubernetes", "verify_ssl")]
    assert b.transport_notes()[1].message.startswith("OVN northbound DB at tcp:192.0.2.5:6641 over plain tcp")
    assert b.transport_notes()[2].message == (
        "Kubernetes API at https://api.example:6443: TLS certificate not verified (verify_ssl: false)")


# ------------------------------------------------------------------ Kubernetes
@pytest.mark.parametrize(
    ("section", "settings"),
    [({"host": "https://api.example:6443"}, []),
     ({"host": "https://api.example:6443", "verify_ssl": False}, ["verify_ssl"]),
     ({"host": "http://api.example:8080"}, ["host"]),
     ({"host": "http://127.0.0.1:8001"}, []),
     ({"host": "http://localhost:8001"}, []),
     ({"host": "http://[::1]:8001"}, [])],
    ids=["https", "verify-off", "http-remote", "http-loopback", "http-localhost", "http-ipv6-loopback"],
)  # fmt: skip
def test_kubernetes_transport_notes(section: dict[str, Any], settings: list[str]) -> None:
    assert [n.setting for n in K8sNodeDriver.from_section(section).transport_notes()] == settings


def test_kubernetes_verify_ssl_must_be_a_bool() -> None:
    with pytest.raises(ConfigError) as ei:  # "false" used to be bool("false") == True, silently
        K8sNodeDriver.from_section({"host": "https://api.example:6443", "verify_ssl": "false"})
    assert ei.value.field == "dpu.kubernetes.verify_ssl"


def test_kubernetes_ca_cert(files: dict[str, str], tmp_path: Path) -> None:
    d = K8sNodeDriver.from_section({"host": "https://api.example:6443", "ca_cert": files["ca_cert"]})
    assert d.api.api_client.configuration.ssl_ca_cert == files["ca_cert"]
    (tmp_path / "not-pem").write_text("x")
    with pytest.raises(ConfigError) as ei:
        K8sNodeDriver.from_section({"host": "https://api.example:6443", "ca_cert": str(tmp_path / "not-pem")})
    assert ei.value.field == "dpu.kubernetes.ca_cert"


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604], ids=["world-readable", "group-readable", "other-read"])
def test_kubernetes_token_file_must_be_owner_only(tmp_path: Path, mode: int) -> None:
    """Regression (issue 18, 8): the token file was read whatever its mode."""
    f = tmp_path / "k8s.token"
    f.write_text("k8s-token-value\n")
    f.chmod(mode)
    with pytest.raises(ConfigError) as ei:
        K8sNodeDriver.from_section({"host": "https://api.example:6443", "token_file": str(f)})
    assert ei.value.field == "dpu.kubernetes.token_file" and f"{mode:04o}" in str(ei.value)
    assert "k8s-token-value" not in str(ei.value)


def test_kubernetes_token_file_0600_is_sent_as_bearer(tmp_path: Path) -> None:
    f = tmp_path / "k8s.token"
    f.write_text("k8s-token-value\n")
    f.chmod(0o600)
    d = K8sNodeDriver.from_section({"host": "https://api.example:6443", "token_file": str(f)})
    assert d.api.api_client.configuration.api_key == {"authorization": "Bearer k8s-token-value"}


# ------------------------------------------------------------------ Fabric Manager
def test_fabric_manager_over_tcp_to_another_host_is_reported() -> None:
    d = FmpmDriver(fm={"gpu-a": "unix:/run/fm.sock", "gpu-b": "tcp:10.0.0.7", "gpu-c": "127.0.0.1", "gpu-d": "fm-d"})
    assert d.transport_notes() == (
        TransportNote("gpu-b", "fm", "Fabric Manager of gpu-b at 10.0.0.7:6666 over plain TCP: FM's API is "
                      "unencrypted and unauthenticated"),
        TransportNote("gpu-d", "fm", "Fabric Manager of gpu-d at fm-d:6666 over plain TCP: FM's API is "
                      "unencrypted and unauthenticated"),
    )  # fmt: skip


# ------------------------------------------------------------------ into the audit's findings
def test_transport_violations_name_the_fabric_of_each_source() -> None:
    dpu: Any = DpuKind().build(OK | {"ovn_nb": "tcp:192.0.2.5:6641"}, DRIVERS.__getitem__, {})
    eth = OvsdbSwitchDriver("leaf-1", "tcp:192.0.2.1:6640", 4000)
    nv = FmpmDriver(fm={"gpu-b": "tcp:10.0.0.7"})
    got = transport_violations([("ethernet", eth), ("ethernet", None), ("dpu", dpu), ("nvlink", nv)])
    assert [(v.invariant, v.severity, v.fabric, v.device, v.resource) for v in got] == [
        ("TRANSPORT-INSECURE", Severity.HIGH, "ethernet", "leaf-1", "transport:remote"),
        ("TRANSPORT-INSECURE", Severity.HIGH, "dpu", "ovn-nb", "transport:remote"),
        ("TRANSPORT-INSECURE", Severity.HIGH, "nvlink", "gpu-b", "transport:fm"),
    ]
    assert all(isinstance(v, Violation) for v in got)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MoveEngine]:
    """The in-memory engine of tests/unit/test_engine_memory.py (Ethernet, IB, memory fabrics)."""
    reg = Registry.from_entry_points()
    register(reg)
    fabrics = Fabrics.from_config(memory_engine.fabrics_config(), reg)
    store = Store.open(url=f"sqlite:///{tmp_path / 'g.db'}")
    store.upsert_inventory(memory_engine.inventory())
    yield MoveEngine(store, fabrics, memory_engine.CFG, worker="test:1", heartbeat_every=60)
    fabrics.close()
    store.close()


def test_the_audit_reports_what_any_backend_says_of_its_transport(engine: MoveEngine) -> None:
    """The service asks every backend (the DPU one, NVLink's FmpmDriver), not only the
    Ethernet switches and the SM; shown with the in-memory fabrics."""
    assert not [v for v in audit(engine).violations if v.invariant == "TRANSPORT-INSECURE"]
    b: Any = engine.fabrics.backends["memory"]
    b.kind = "dpu"
    b.transport_notes = lambda: plain_remote_notes("ovn-nb", "tcp:192.0.2.5:6641", "OVN northbound DB")
    found = [v for v in audit(engine).violations if v.invariant == "TRANSPORT-INSECURE"]
    assert [(v.fabric, v.device, v.resource, v.severity) for v in found] == [
        ("dpu", "ovn-nb", "transport:remote", Severity.HIGH)]
    assert found[0].message.startswith("OVN northbound DB at tcp:192.0.2.5:6641 over plain tcp")


@pytest.mark.parametrize(
    ("fabrics", "field"),
    [("ethernet:\n  - {driver: ovsdb, options: {switch: leaf-1, remote: 'ssl:192.0.2.1:6640'}}\n", "private_key"),
     ("dpu:\n  ovn_nb: 'ssl:192.0.2.1:6641'\n", "dpu.tls")],
    ids=["ethernet", "dpu"],
)  # fmt: skip
def test_cli_refuses_ssl_without_files_in_one_line(tmp_path: Path, fabrics: str, field: str) -> None:
    (tmp_path / "fabrics.yaml").write_text(fabrics)
    env = {**os.environ, "GPUFABRIC_HOME": str(tmp_path)}
    gf = [sys.executable, "-c", "from gpufabric.cli.main import main; main()"]
    r = subprocess.run([*gf, "audit"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and f"invalid {field}:" in r.stderr, r.stderr
