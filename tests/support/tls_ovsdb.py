"""Real OVSDB servers listening on ``pssl:`` for the transport tests, with certificates made here.

:func:`make_pki` writes two throw-away CAs with ``openssl`` (the one the servers and the
good client use, and an unrelated one) and, for each, a client key/certificate.
:class:`TlsOvs` is an Open_vSwitch ``ovsdb-server`` listening on ``punix:`` (the test's own
check channel) and ``pssl:0:127.0.0.1`` (the port it picked is read from its log), plus an
``ovs-vswitchd`` in a namespace of its own (the Ethernet driver waits for ``cur_cfg``).
:class:`TlsOvn` is an OVN central: NB on ``punix:`` + ``pssl:``, SB on ``punix:``, and
``ovn-northd`` over the unix sockets (the NB driver waits with ``--wait=sb``). Every process
is recorded by pid and stopped by pid; the namespace is deleted.
"""

from __future__ import annotations

import re
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gpufabric.lab.procs import pid_alive, read_pid, run, stop_pid, wait_for
from gpufabric.transport.secrets import TlsFiles

VS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
NB_SCHEMA = "/usr/share/ovn/ovn-nb.ovsschema"
SB_SCHEMA = "/usr/share/ovn/ovn-sb.ovsschema"


@dataclass(frozen=True)
class Pki:
    ca: Path  # signs the servers' and the good client's certificates
    server: TlsFiles  # the servers' identity (trusting ``ca``)
    client: TlsFiles  # signed by ``ca``, trusts ``ca``
    wrong_ca: TlsFiles  # the good client's key and certificate, trusting an unrelated CA
    foreign: TlsFiles  # key and certificate signed by the unrelated CA, trusting ``ca``


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _ca(d: Path, name: str) -> tuple[Path, Path]:
    key, cert = d / f"{name}-ca.key", d / f"{name}-ca.pem"
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", f"/CN=gpufabric test {name} CA")  # fmt: skip
    return key, cert


def _leaf(d: Path, name: str, ca_key: Path, ca_cert: Path) -> tuple[Path, Path]:
    key, csr, cert = d / f"{name}.key", d / f"{name}.csr", d / f"{name}.pem"
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", str(key), "-out", str(csr), "-subj", f"/CN=gpufabric-{name}")  # fmt: skip
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key), "-CAcreateserial",
             "-out", str(cert), "-days", "1")  # fmt: skip
    key.chmod(0o600)
    return key, cert


def make_pki(d: Path) -> Pki:
    d.mkdir(parents=True, exist_ok=True)
    ca_key, ca = _ca(d, "good")
    other_key, other = _ca(d, "other")
    s_key, s_cert = _leaf(d, "server", ca_key, ca)
    c_key, c_cert = _leaf(d, "client", ca_key, ca)
    f_key, f_cert = _leaf(d, "foreign", other_key, other)
    return Pki(
        ca=ca,
        server=TlsFiles(str(s_key), str(s_cert), str(ca)),
        client=TlsFiles(str(c_key), str(c_cert), str(ca)),
        wrong_ca=TlsFiles(str(c_key), str(c_cert), str(other)),
        foreign=TlsFiles(str(f_key), str(f_cert), str(ca)),
    )


def _ovsdb_server(d: Path, name: str, schema: str, tls: TlsFiles | None) -> int | None:
    """Start one ovsdb-server (punix, and pssl with ``tls``); the pssl port, or None."""
    db = d / f"{name}.db"
    run(["ovsdb-tool", "create", str(db), schema])
    ssl = [] if tls is None else ["--remote=pssl:0:127.0.0.1", *tls.cli_args()]
    run(["ovsdb-server", str(db), f"--remote=punix:{d / name}.sock", *ssl, f"--pidfile={d / name}.pid",
         f"--log-file={d / name}.log", f"--unixctl={d / name}.ctl", "--detach"])  # fmt: skip
    if tls is None:
        return None
    log = d / f"{name}.log"
    wait_for(lambda: "listening on port" in log.read_text(), 10, f"{name} pssl listener")
    m = re.search(r"listening on port (\d+)", log.read_text())
    assert m is not None
    return int(m.group(1))


class TlsOvs:
    """Open_vSwitch DB on punix + pssl, ovs-vswitchd (own netns) on the unix socket."""

    def __init__(self, d: Path, pki: Pki) -> None:
        self.dir, self.prefix = d, "gx" + secrets.token_hex(2)
        self.netns = f"{self.prefix}-ns"
        d.mkdir(parents=True, exist_ok=True)
        self.port = _ovsdb_server(d, "conf", VS_SCHEMA, pki.server)
        self.unix = f"unix:{d / 'conf.sock'}"
        self.ssl = f"ssl:127.0.0.1:{self.port}"
        self.vsctl("--no-wait", "init")
        run(["ip", "netns", "add", self.netns])
        run(["ip", "netns", "exec", self.netns, "ovs-vswitchd", self.unix, f"--pidfile={d}/ovs-vswitchd.pid",
             f"--log-file={d}/ovs-vswitchd.log", f"--unixctl={d}/ovs-vswitchd.ctl", "--detach"])  # fmt: skip
        wait_for(lambda: pid_alive(read_pid(d / "ovs-vswitchd.pid")), 10, "ovs-vswitchd")

    def vsctl(self, *args: str) -> str:
        return run(["ovs-vsctl", f"--db={self.unix}", "--timeout=20", *args]).strip()

    def stop(self) -> None:
        for name in ("ovs-vswitchd", "conf"):
            stop_pid(read_pid(self.dir / f"{name}.pid"))
        if self.netns in run(["ip", "netns", "list"]).split():
            run(["ip", "netns", "del", self.netns])


class TlsOvn:
    """OVN central: NB on punix + pssl, SB on punix, ovn-northd on the unix sockets."""

    def __init__(self, d: Path, pki: Pki) -> None:
        self.dir = d
        d.mkdir(parents=True, exist_ok=True)
        self.port = _ovsdb_server(d, "nb", NB_SCHEMA, pki.server)
        _ovsdb_server(d, "sb", SB_SCHEMA, None)
        self.unix = f"unix:{d / 'nb.sock'}"
        self.ssl = f"ssl:127.0.0.1:{self.port}"
        run(["ovn-northd", f"--ovnnb-db={self.unix}", f"--ovnsb-db=unix:{d / 'sb.sock'}", f"--pidfile={d}/northd.pid",
             f"--log-file={d}/northd.log", f"--unixctl={d}/northd.ctl", "--detach"])  # fmt: skip
        self.nbctl("--wait=sb", "sync")

    def nbctl(self, *args: str) -> str:
        return run(["ovn-nbctl", f"--db={self.unix}", "--timeout=20", *args]).strip()

    def stop(self) -> None:
        for name in ("northd", "nb", "sb"):
            stop_pid(read_pid(self.dir / f"{name}.pid"))
