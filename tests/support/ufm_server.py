"""A local stand-in for NVIDIA UFM's documented PKey REST API, for driver tests.

Implements, in memory, what UFM Enterprise's "PKey GUIDs REST API" documents under
``/ufmRest/resources/pkeys`` (basic auth) and ``/ufmRestV3/...`` (token,
``Authorization: Basic <token>``):

- ``GET  /resources/pkeys`` -> ``{"0xa01": {"partition", "ip_over_ib"}, ...}`` (with
  ``guids_data=true`` each entry also has ``guids``); the management key 0x7fff is listed;
- ``GET  /resources/pkeys/<pkey>[?guids_data=true]`` -> ``{"partition", "ip_over_ib",
  "guids": [{"guid", "membership", "index0"}]}``; unknown PKey -> ``missing_status``
  (404, or 200 with ``{}``: both answers are seen from UFM versions in the wild);
- ``POST /resources/pkeys`` ``{pkey, guids, membership|memberships, index0, ip_over_ib}``
  adds GUIDs, creating the PKey if needed; ``pkey`` must be a hex string strictly between
  0x0 and 0x7fff, each GUID a hex string of 16-20 characters -> else 400;
- ``POST /resources/pkeys/add`` ``{pkey, index0, ip_over_ib, mtu_limit, service_level,
  rate_limit}`` creates a PKey without GUIDs (only ``pkey`` required; 400 when it exists);
  every PKey reports ``mtu_limit``, ``service_level`` and ``rate_limit`` (defaults 2, 0, 2.5,
  as the docs' example and the UFM 6.11 client output seen in ``ufmclient``'s README show;
  the field names of the GET answer are the create call's, not confirmed by the docs);
- ``PUT  /resources/pkeys`` same body: sets the PKey's GUIDs to exactly the given ones (the
  docs name "Set GUIDs for PKey"; its exact semantics are not confirmed; the driver does
  not use it);
- ``DELETE /resources/pkeys/<pkey>/guids/<g1>,<g2>`` and ``DELETE /resources/pkeys/<pkey>``
  -> 404 for an unknown PKey, 400 for 0x7fff (read-only management key).

It serves HTTPS by default with a certificate made for the test (:func:`make_test_ca`: a
throw-away CA and a server certificate for 127.0.0.1); ``UfmServer.ca_file`` is the CA
bundle to pass to the driver as ``verify``. ``tls=False`` serves plain http.

Every authenticated request is recorded in ``requests`` (method, path, body). ``fail``
injects an HTTP error for requests matching a method and path prefix. ``drop_empty``
makes a PKey vanish with its last GUID (reported of some UFM versions, not documented).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import re
import ssl
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

_GUID_RE = re.compile(r"^(0x)?[0-9a-fA-F]{16}$")
_PKEY_RE = re.compile(r"^0x[0-9a-fA-F]{1,4}$")
MANAGEMENT = 0x7FFF


@dataclass
class PKeyRecord:
    name: str
    ip_over_ib: bool = True
    index0: bool = False
    members: dict[str, str] = field(default_factory=dict)  # 16 hex digits -> full|limited
    qos: dict[str, Any] = field(default_factory=lambda: {"mtu_limit": 2, "service_level": 0, "rate_limit": 2.5})


@dataclass
class Fault:
    method: str
    path_prefix: str
    status: int
    body: str
    count: int


class UfmState:
    def __init__(self, missing_status: int, drop_empty: bool) -> None:
        self.lock = threading.Lock()
        self.pkeys: dict[int, PKeyRecord] = {MANAGEMENT: PKeyRecord("management", ip_over_ib=True)}
        self.requests: list[tuple[str, str, Any]] = []
        self.faults: list[Fault] = []
        self.missing_status = missing_status
        self.drop_empty = drop_empty


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _pkey(text: Any, *, writable: bool = True) -> int:
    if not isinstance(text, str) or not _PKEY_RE.match(text):
        raise BadRequest(400, f"Invalid pkey {text!r}: hexadecimal string between 0x0-0x7fff exclusive")
    v = int(text, 16)
    if not 0 < v < MANAGEMENT + (0 if writable else 1):
        raise BadRequest(400, f"Invalid pkey {text!r}: hexadecimal string between 0x0-0x7fff exclusive")
    return v


def _guid(text: Any) -> str:
    if not isinstance(text, str) or not 16 <= len(text) <= 20 or not _GUID_RE.match(text):
        raise BadRequest(400, f"Invalid GUID {text!r}: hexadecimal string of 16-20 characters")
    return text.lower().removeprefix("0x")


def _bool(body: dict[str, Any], key: str, default: bool) -> bool:
    v = body.get(key, default)
    if not isinstance(v, bool):
        raise BadRequest(400, f"{key} must be true or false")
    return v


class Handler(BaseHTTPRequestHandler):
    server: UfmHttpServer
    protocol_version = "HTTP/1.1"  # keep-alive; every reply has Content-Length
    disable_nagle_algorithm = True  # headers and body are two writes: avoid the 40 ms delayed-ACK stall

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _reply(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized_prefix(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Basic "):
            return None
        cred = auth.removeprefix("Basic ")
        if self.server.token and cred == self.server.token:
            return "/ufmRestV3"
        try:
            user_pass = base64.b64decode(cred).decode()
        except ValueError:
            return None
        return "/ufmRest" if user_pass == f"{self.server.username}:{self.server.password}" else None

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        prefix = self._authorized_prefix()
        if prefix is None or not (url.path == prefix or url.path.startswith(prefix + "/")):
            self._reply(401, {"error": "Unauthorized"})
            return
        path = url.path[len(prefix) :].rstrip("/")
        body: Any = None
        length = int(self.headers.get("Content-Length") or 0)
        st = self.server.state
        try:
            if length:
                try:
                    body = json.loads(self.rfile.read(length))
                except ValueError:
                    raise BadRequest(400, "request body is not JSON") from None
            with st.lock:
                st.requests.append((method, path, body))
                for f in st.faults:
                    if f.count and f.method == method and path.startswith(f.path_prefix):
                        f.count -= 1
                        raise BadRequest(f.status, f.body)
                status, payload = self._route(method, path, parse_qs(url.query), body)
        except BadRequest as e:
            status, payload = e.status, {"error": str(e)}
        self._reply(status, payload)

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        st = self.server.state
        parts = [unquote(p) for p in path.split("/")[1:]]
        if parts[:2] != ["resources", "pkeys"]:
            return 404, {"error": f"no such resource {path}"}
        guids_data = query.get("guids_data", ["false"])[0].lower() == "true"
        if method == "GET" and len(parts) == 2:
            return 200, {f"0x{k:x}": self._view(r, guids_data) for k, r in sorted(st.pkeys.items())}
        if method == "GET" and len(parts) == 3:
            pk = _pkey(parts[2], writable=False)
            if pk not in st.pkeys:
                return (404, {"error": f"PKey 0x{pk:x} not found"}) if st.missing_status == 404 else (200, {})
            return 200, self._view(st.pkeys[pk], guids_data)
        if method in ("POST", "PUT") and len(parts) == 2:
            return self._add(body, replace=method == "PUT")
        if method == "POST" and parts[2:] == ["add"]:
            return self._create(body)
        if method == "DELETE" and len(parts) in (3, 5):
            pk = _pkey(parts[2], writable=False)
            if pk == MANAGEMENT:
                raise BadRequest(400, "the management PKey is read-only")
            if pk not in st.pkeys:
                raise BadRequest(404, f"PKey 0x{pk:x} not found")
            if len(parts) == 3:
                del st.pkeys[pk]
                return 200, {}
            if parts[3] != "guids":
                return 404, {"error": f"no such resource {path}"}
            guids = [_guid(g) for g in parts[4].split(",")]
            for g in guids:
                st.pkeys[pk].members.pop(g, None)
            if st.drop_empty and not st.pkeys[pk].members:
                del st.pkeys[pk]
            return 200, {}
        return 405, {"error": f"{method} not allowed on {path}"}

    def _add(self, body: Any, *, replace: bool) -> tuple[int, Any]:
        if not isinstance(body, dict):
            raise BadRequest(400, "JSON object expected")
        pk = _pkey(body.get("pkey"))
        raw_guids = body.get("guids")
        if not isinstance(raw_guids, list) or not raw_guids:
            raise BadRequest(400, "guids: non-empty list of port GUIDs is mandatory")
        guids = [_guid(g) for g in raw_guids]
        if "membership" in body and "memberships" in body:
            raise BadRequest(400, "membership and memberships conflict")
        if "memberships" in body:
            ms = body["memberships"]
            if not isinstance(ms, list) or len(ms) != len(guids):
                raise BadRequest(400, "memberships must be a list as long as guids")
        else:
            ms = [body.get("membership", "full")] * len(guids)
        if any(m not in ("full", "limited") for m in ms):
            raise BadRequest(400, "membership must be 'full' or 'limited'")
        ipoib, index0 = _bool(body, "ip_over_ib", True), _bool(body, "index0", False)
        st = self.server.state
        rec = st.pkeys.get(pk)
        if rec is None:
            rec = st.pkeys[pk] = PKeyRecord(f"api_pkey_0x{pk:x}", ipoib, index0)
        if replace:
            rec.members.clear()
            rec.ip_over_ib, rec.index0 = ipoib, index0
        rec.members.update(zip(guids, ms, strict=True))
        return 200, {}

    def _create(self, body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict):
            raise BadRequest(400, "JSON object expected")
        pk = _pkey(body.get("pkey"))
        st = self.server.state
        if pk in st.pkeys:
            raise BadRequest(400, f"PKey 0x{pk:x} already exists")
        rec = PKeyRecord(f"api_pkey_0x{pk:x}", _bool(body, "ip_over_ib", True), _bool(body, "index0", False))
        for key, ok in (("mtu_limit", int), ("service_level", int), ("rate_limit", (int, float))):
            if key in body:
                if isinstance(body[key], bool) or not isinstance(body[key], ok):
                    raise BadRequest(400, f"{key}: a number")
                rec.qos[key] = body[key]
        st.pkeys[pk] = rec
        return 200, {}

    @staticmethod
    def _view(r: PKeyRecord, guids_data: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"partition": r.name, "ip_over_ib": r.ip_over_ib, **r.qos}
        if guids_data:
            out["guids"] = [{"guid": g, "membership": m, "index0": r.index0} for g, m in sorted(r.members.items())]
        return out

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")


class UfmHttpServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, username: str, password: str, token: str, state: UfmState) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.username, self.password, self.token, self.state = username, password, token, state


def make_test_ca(directory: Path, host: str = "127.0.0.1") -> tuple[Path, Path, Path]:
    """A throw-away CA and a server certificate for ``host`` (IP SAN), written to
    ``directory``: (ca.pem, server.pem, server.key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpufabric test CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    ca_pem, cert_pem, key_pem = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    key_pem.chmod(0o600)
    return ca_pem, cert_pem, key_pem


@dataclass
class UfmServer:
    """Handle on a running server: ``url``, credentials, state, recorded requests, and
    ``ca_file`` (the CA bundle that verifies its certificate; None over plain http)."""

    http: UfmHttpServer
    ca_file: Path | None = None

    @property
    def url(self) -> str:
        host, port = self.http.server_address[:2]
        return f"{'https' if self.ca_file else 'http'}://{host!s}:{port}"

    @property
    def state(self) -> UfmState:
        return self.http.state

    @property
    def requests(self) -> list[tuple[str, str, Any]]:
        return self.http.state.requests

    def writes(self) -> list[tuple[str, str, Any]]:
        return [r for r in self.requests if r[0] != "GET"]

    def fail(
        self, method: str, path_prefix: str, status: int = 500, body: str = "internal error", count: int = 1
    ) -> None:
        with self.state.lock:
            self.state.faults.append(Fault(method, path_prefix, status, body, count))

    def members(self) -> dict[int, dict[str, str]]:
        with self.state.lock:
            return {k: dict(r.members) for k, r in self.state.pkeys.items() if k != MANAGEMENT}


@contextmanager
def ufm_server(
    username: str = "admin",
    password: str = "s3cret-test",
    token: str = "tok-test-0123456789",
    *,
    missing_status: int = 404,
    drop_empty: bool = False,
    tls: bool = True,
) -> Iterator[UfmServer]:
    """Serve on 127.0.0.1 at a free port in a thread (HTTPS unless ``tls=False``); stop on exit."""
    http = UfmHttpServer(username, password, token, UfmState(missing_status, drop_empty))
    with tempfile.TemporaryDirectory(prefix="ufm-tls-") as tmp:
        ca_file = None
        if tls:
            ca_file, cert, key = make_test_ca(Path(tmp))
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            http.socket = ctx.wrap_socket(http.socket, server_side=True)
        thread = threading.Thread(
            target=http.serve_forever, kwargs={"poll_interval": 0.05}, name="ufm-test-server", daemon=True
        )
        thread.start()
        try:
            yield UfmServer(http, ca_file)
        finally:
            http.shutdown()
            http.server_close()
            thread.join(timeout=5)
