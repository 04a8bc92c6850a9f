"""Secrets of the drivers (UFM password/token, SSH key passphrase), TLS client files, and
transport notes.

A secret comes from a file (``<name>_file:``, which must be owner-only: mode 0600 or
stricter) or from the environment (``<name>_env:``, the variable's name), never inline in
fabrics.yaml: an inline string is refused. Code that already holds the value (tests, the
lab) passes a :class:`Secret`. A :class:`Secret` never prints its value (``repr``/``str``
say ``***`` and where it came from); :meth:`Secret.reveal` is the one way to read it.

:class:`TlsFiles` is the client side of an OVSDB/OVN ``ssl:`` remote: private key,
certificate and the CA that must have signed the server's certificate, checked once at
load (:func:`load_tls`: all three or none, readable PEM files, the key owner-only).

:class:`TransportNote` is what a driver reports about its own transport when it was
configured below the secure default (``insecure: true``, plain http, TLS not verified,
an OVSDB ``tcp:`` remote): the audit turns each note into a ``TRANSPORT-INSECURE`` finding.
:func:`remote_methods` and :func:`plain_remote_notes` are the one reading of an OVSDB
connection string (``unix:``/``tcp:``/``ssl:``, comma-separated) the drivers share.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from gpufabric.domain.errors import ConfigError


@dataclass(frozen=True)
class Secret:
    """A secret value that never shows itself in a repr, a log line or an error."""

    value: str = field(repr=False)
    source: str = "code"

    def reveal(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"Secret(***, from {self.source})"

    __str__ = __repr__


OWNER_ONLY: Final = "mode 0600 or stricter (chmod 600): not readable by group or others"


def owner_only(field_name: str, path: str | os.PathLike[str], st_mode: int, insecure: bool = False) -> bool:
    """Whether a file holding a secret (mode ``st_mode``) is owner-only. A file group or
    others may access is a one-line ConfigError naming ``field_name`` and the mode required,
    unless ``insecure`` (then False: the caller reports it, e.g. as a :class:`TransportNote`)."""
    if not st_mode & 0o077:
        return True
    if insecure:
        return False
    raise ConfigError(field_name, str(path), OWNER_ONLY, f"mode {stat.S_IMODE(st_mode):04o}")


def loose_note(device: str, what: str, path: str | os.PathLike[str]) -> TransportNote:
    """The audit's note for a secret-holding file accepted with loose mode (``insecure: true``)."""
    return TransportNote(device, "insecure", f"{what} {path} is readable by group or others (insecure: true)")


def secret_file(field_name: str, path: str | os.PathLike[str]) -> Secret:
    """Read a secret file; refuse it unless it is a regular file with no group/other access."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise ConfigError(f"{field_name}_file", str(p), "a readable file", e.strerror or str(e)) from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{field_name}_file", str(p), "a regular file")
    owner_only(f"{field_name}_file", p, st.st_mode)
    try:
        value = p.read_text().strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{field_name}_file", str(p), "a readable UTF-8 file", str(e)) from None
    if not value:
        raise ConfigError(f"{field_name}_file", str(p), "a non-empty secret")
    return Secret(value, f"file {p}")


def secret_env(field_name: str, var: str) -> Secret:
    value = os.environ.get(var, "")
    if not value:
        raise ConfigError(f"{field_name}_env", var, "the name of a set, non-empty environment variable")
    return Secret(value, f"${var}")


def load_secret(
    field_name: str, inline: object = None, file: str | None = None, env: str | None = None
) -> Secret | None:
    """The secret ``field_name`` from exactly one of: a :class:`Secret` given by code,
    ``file``, ``env``. An inline string (a password written into fabrics.yaml) is refused."""
    given = [x for x in (inline, file, env) if x]
    if len(given) > 1:
        raise ConfigError(field_name, "given more than once", f"one of {field_name}_file or {field_name}_env")
    if inline:
        if not isinstance(inline, Secret):
            raise ConfigError(
                field_name, "*** (inline)", f"{field_name}_file: (mode 0600) or {field_name}_env:", "inline secrets are refused"
            )
        return inline
    if file:
        return secret_file(field_name, file)
    if env:
        return secret_env(field_name, env)
    return None


# ---------------------------------------------------------------------- TLS client files
TLS_FIELDS: Final = ("private_key", "certificate", "ca_cert")
_PEM_MARK: Final = {"private_key": b"PRIVATE KEY-----", "certificate": b"-----BEGIN CERTIFICATE-----",
                    "ca_cert": b"-----BEGIN CERTIFICATE-----"}  # fmt: skip


@dataclass(frozen=True)
class TlsFiles:
    """Absolute paths of a TLS client identity: key (mode 0600 or stricter), certificate,
    and the CA bundle the server's certificate must chain to."""

    private_key: str
    certificate: str
    ca_cert: str

    def cli_args(self) -> tuple[str, ...]:
        """The options of ``ovs-vsctl``/``ovn-nbctl`` (and every OVS/OVN client) for these files."""
        return (f"--private-key={self.private_key}", f"--certificate={self.certificate}", f"--ca-cert={self.ca_cert}")


def _tls_file(where: str, name: str, raw: object) -> str:
    f = f"{where}{name}"
    if not isinstance(raw, str) or not raw.strip():
        raise ConfigError(f, raw, "a path to a PEM file")
    p = Path(os.path.expanduser(raw)).absolute()
    try:
        st = p.stat()
        data = p.read_bytes() if stat.S_ISREG(st.st_mode) else b""
    except OSError as e:
        raise ConfigError(f, str(p), "a readable PEM file", e.strerror or str(e)) from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f, str(p), "a regular, readable PEM file")
    if _PEM_MARK[name] not in data:
        what = "a PEM private key" if name == "private_key" else "a PEM certificate"
        raise ConfigError(f, str(p), what, "no such PEM block in the file")
    if name == "private_key":
        owner_only(f, p, st.st_mode)
    if name == "private_key" and (b"ENCRYPTED" in data):
        raise ConfigError(f, str(p), "an unencrypted PEM private key (OVS/OVN clients take no passphrase)")
    return str(p)


def _tls_pair(where: str, tls: TlsFiles) -> None:
    """The CA bundle parses and the key matches the certificate (as the TLS library will see them)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        ctx.load_verify_locations(tls.ca_cert)
    except ssl.SSLError as e:
        raise ConfigError(f"{where}ca_cert", tls.ca_cert, "a PEM CA bundle", e.reason or str(e)) from None
    try:
        ctx.load_cert_chain(tls.certificate, tls.private_key, password=b"-no-passphrase-")  # never prompts
    except ssl.SSLError as e:
        raise ConfigError(f"{where}certificate", tls.certificate, "the certificate of private_key",
                          e.reason or str(e)) from None  # fmt: skip


def load_tls(where: str, private_key: object = None, certificate: object = None, ca_cert: object = None) -> TlsFiles | None:
    """The TLS client files named by ``private_key``/``certificate``/``ca_cert`` (all three or
    none: None). ``where`` prefixes the field in errors (e.g. ``"dpu.tls."``)."""
    given = {"private_key": private_key, "certificate": certificate, "ca_cert": ca_cert}
    if not any(given.values()):
        return None
    missing = [k for k, v in given.items() if not v]
    if missing:
        raise ConfigError(f"{where}{missing[0]}", None, "all three of private_key, certificate, ca_cert (PEM files)")
    tls = TlsFiles(*(_tls_file(where, k, v) for k, v in given.items()))
    _tls_pair(where, tls)
    return tls


# ---------------------------------------------------------------------- transport notes
@dataclass(frozen=True, order=True)
class TransportNote:
    """A transport running below the secure default, as its driver was told to."""

    device: str  # e.g. "leaf1" or "ufm"
    setting: str  # e.g. "insecure", "allow_http", "verify", "remote"
    message: str


def remote_methods(remote: str) -> tuple[str, ...]:
    """The method (``unix``, ``tcp``, ``ssl``...) of each comma-separated part of an OVSDB remote."""
    return tuple(part.strip().partition(":")[0] for part in remote.split(",") if part.strip())


def plain_remote_notes(device: str, remote: str, what: str) -> tuple[TransportNote, ...]:
    """A note per ``tcp:`` part of ``remote`` (``what``: e.g. "OVSDB of leaf-1"): plain TCP
    carries the database unencrypted and unauthenticated, whoever reaches the port may write."""
    return tuple(
        TransportNote(device, "remote", f"{what} at {part.strip()} over plain tcp: unencrypted, any client "
                      "reaching the port may read and write it (use ssl: with private_key/certificate/ca_cert)")
        for part in remote.split(",") if part.strip().startswith("tcp:")
    )  # fmt: skip


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1): traffic that never leaves the host."""
    h = host.strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False
