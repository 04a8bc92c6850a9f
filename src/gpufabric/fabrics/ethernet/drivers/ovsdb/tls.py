"""The TLS client identity of python-ovs, for OVSDB ``ssl:`` remotes, and a bounded TLS probe.

python-ovs keeps the private key, certificate and CA of every ``ssl:`` connection as *class*
attributes of :class:`ovs.stream.Stream` (``Stream.ssl_set_private_key_file`` and friends),
read each time a connection is opened, including the reconnects its IDL makes in ovsdbapp's
connection thread. A process can therefore hold one identity at a time: :func:`acquire`
installs ``tls`` for a holder (an :class:`~gpufabric.fabrics.ethernet.drivers.ovsdb.pool.OvsdbPool`
about to open an ``ssl:`` connection) and refuses a *different* identity while another holder
has live connections (a one-line ConfigError, instead of a later reconnect silently presenting
the wrong certificate); :func:`release` is called when the holder closes.

python-ovs verifies the server's certificate against ``ca_cert`` (``CERT_REQUIRED``, TLS 1.2
or later) but not its host name, as every OVS client does: trust is "signed by this CA".
:func:`probe_ssl` does the same handshake with the standard library and one JSON-RPC echo,
bounded by a timeout, so a wrong CA or a silent server fails fast with a clear message
(python-ovs's own schema fetch has no timeout).
"""

from __future__ import annotations

import json
import socket
import ssl
import threading

from ovs.stream import Stream

from gpufabric.domain.errors import ConfigError
from gpufabric.transport.secrets import TlsFiles

_lock = threading.Lock()
_active: TlsFiles | None = None
_holders: set[int] = set()


def acquire(holder: object, tls: TlsFiles) -> None:
    """Install ``tls`` as python-ovs's SSL identity for ``holder``; ConfigError if another
    holder still uses a different one."""
    global _active
    with _lock:
        _refuse_other(holder, tls)
        Stream.ssl_set_private_key_file(tls.private_key)
        Stream.ssl_set_certificate_file(tls.certificate)
        Stream.ssl_set_ca_cert_file(tls.ca_cert)
        _active = tls
        _holders.add(id(holder))


def check(holder: object, tls: TlsFiles) -> None:
    """ConfigError if :func:`acquire` would refuse ``tls`` for ``holder`` now (installs nothing)."""
    with _lock:
        _refuse_other(holder, tls)


def _refuse_other(holder: object, tls: TlsFiles) -> None:
    if _holders - {id(holder)} and _active != tls:
        assert _active is not None
        raise ConfigError(
            "private_key", tls.private_key,
            f"the TLS identity already in use by this process's OVSDB ssl: connections ({_active.private_key}); "
            "python-ovs holds one per process",
        )  # fmt: skip


def release(holder: object) -> None:
    """``holder`` has no ``ssl:`` connection left (the identity stays installed, unused)."""
    with _lock:
        _holders.discard(id(holder))


def active() -> TlsFiles | None:
    """The identity python-ovs presents now (None: never set by gpufabric)."""
    with _lock:
        return _active


def client_context(tls: TlsFiles) -> ssl.SSLContext:
    """The context python-ovs builds for an ``ssl:`` remote, from the same files."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_verify_locations(tls.ca_cert)
    ctx.load_cert_chain(tls.certificate, tls.private_key)
    return ctx


def probe_ssl(host: str, port: int, tls: TlsFiles, timeout: float) -> bytes:
    """TLS handshake + one JSON-RPC ``echo``; returns the reply bytes. Raises OSError
    (``ssl.SSLError`` included) or ValueError."""
    ctx = client_context(tls)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as raw:
        raw.settimeout(timeout)
        raw.connect((host, port))
        with ctx.wrap_socket(raw) as sock:
            sock.sendall(json.dumps({"method": "echo", "params": ["gpufabric"], "id": "probe"}).encode())
            return sock.recv(4096)
