"""The CLI's HTTP/1.1 client (cli/wire.py) against a scripted server on a real socket: answers
with ``Content-Length``, ``chunked`` (read whole and line by line, lines split across chunks) and
to the close; one kept-alive connection for several requests; a kept-alive connection the server
closed is retried once by the remote backend; an answer that is not HTTP is a one-line
``unavailable`` error; and https with a certificate the client trusts."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpufabric.cli.backends.remote import Remote
from gpufabric.cli.wire import Connection, RemoteClosed, WireError
from gpufabric.domain.errors import UnavailableError

Script = Callable[[int, bytes], bytes | tuple[bytes, bool] | None]
"""(request number, request) -> the bytes to answer (with True: then close), or None: close at once."""


class Server:
    """Answers each request with ``script(n, request)``; records requests and connections."""

    def __init__(self, script: Script, tls: ssl.SSLContext | None = None) -> None:
        self.script, self.tls = script, tls
        self.requests: list[bytes] = []
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        if self.tls is not None:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except (ssl.SSLError, OSError):
                conn.close()
                return
        f = conn.makefile("rb")
        with conn:
            while True:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = f.readline()
                    if not line:
                        return
                    head += line
                sizes = [int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length")]
                n = sizes[0] if sizes else 0
                req = head + f.read(n)
                self.requests.append(req)
                out = self.script(len(self.requests), req)
                if out is None:
                    return
                data, close = out if isinstance(out, tuple) else (out, False)
                conn.sendall(data)
                if close:
                    return

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    made: list[Server] = []

    def start(script: Script, tls: ssl.SSLContext | None = None) -> Server:
        made.append(Server(script, tls))
        return made[-1]

    yield start
    for s in made:
        s.close()


def length(body: bytes, status: str = "200 OK", extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def chunked(*parts: bytes) -> bytes:
    out = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    for p in parts:
        out += f"{len(p):x}\r\n".encode() + p + b"\r\n"
    return out + b"0\r\n\r\n"


def test_length_answers_share_one_kept_alive_connection(serve: Callable[..., Server]) -> None:
    srv = serve(lambda n, _req: length(json.dumps({"n": n}).encode(), extra="Set-Cookie: a\r\nset-cookie: b\r\n"))
    c = Connection("127.0.0.1", srv.port, 5)
    first = c.request("GET", "/api/v1/nodes?limit=1", None, {"Accept": "application/json"})
    assert (first.status, json.loads(first.read()), first.will_close) == (200, {"n": 1}, False)
    assert first.headers["set-cookie"] == "a, b" and first.headers["content-type"] == "application/json"
    second = c.request("POST", "/api/v1/moves", None, {})
    assert json.loads(second.read()) == {"n": 2}
    c.close()
    assert srv.connections == 1
    head = srv.requests[0].split(b"\r\n")
    assert head[0] == b"GET /api/v1/nodes?limit=1 HTTP/1.1" and f"Host: 127.0.0.1:{srv.port}".encode() in head
    assert b"Content-Length: 0" in srv.requests[1] and b"Content-Length" not in srv.requests[0]  # as http.client


def test_a_chunked_answer_is_read_whole_or_line_by_line_across_chunks(serve: Callable[..., Server]) -> None:
    parts = (b"event: progress\ndata: {\"a\"", b": 1}\n\nevent: move\n", b"data: {}\n\n", b"tail")
    srv = serve(lambda _n, _req: chunked(*parts))
    c = Connection("127.0.0.1", srv.port, 5)
    assert c.request("GET", "/x", None, {}).read() == b"".join(parts)
    lines = list(c.request("GET", "/x", None, {}))
    assert lines == [b"event: progress\n", b'data: {"a": 1}\n', b"\n", b"event: move\n", b"data: {}\n", b"\n", b"tail"]
    assert srv.connections == 1


def test_an_answer_to_the_close_and_an_http_1_0_one_close_the_connection(serve: Callable[..., Server]) -> None:
    srv = serve(lambda _n, _req: (b"HTTP/1.1 200 OK\r\n\r\nall of it", True))
    a = Connection("127.0.0.1", srv.port, 5).request("GET", "/", None, {})
    assert (a.read(), a.will_close) == (b"all of it", True)
    srv10 = serve(lambda _n, _req: b"HTTP/1.0 404 Not Found\r\nContent-Length: 2\r\n\r\n{}")
    b = Connection("127.0.0.1", srv10.port, 5).request("GET", "/", None, {})
    assert (b.status, b.read(), b.will_close) == (404, b"{}", True)


def test_the_remote_backend_retries_once_when_the_server_closed_its_kept_alive_connection(
    serve: Callable[..., Server],
) -> None:
    srv = serve(lambda n, _req: None if n == 2 else length(b'{"items": [], "total": 0}'))
    r = Remote(f"http://127.0.0.1:{srv.port}", "t0k")
    assert r.tenants() == [] and r.tenants() == []  # the second request's first try finds the connection closed
    assert srv.connections == 2 and len(srv.requests) == 3
    with pytest.raises(RemoteClosed):
        Connection("127.0.0.1", serve(lambda _n, _req: None).port, 5).request("GET", "/", None, {})


def test_an_answer_that_is_not_http_is_one_unavailable_error(serve: Callable[..., Server]) -> None:
    srv = serve(lambda _n, _req: b"SSH-2.0-OpenSSH_9.6\r\n")
    with pytest.raises(WireError, match="not an HTTP/1.x answer"):
        Connection("127.0.0.1", srv.port, 5).request("GET", "/", None, {})
    with pytest.raises(UnavailableError, match=f"cannot reach the API at http://127.0.0.1:{srv.port}/api/v1: not an"):
        Remote(f"http://127.0.0.1:{srv.port}", "t0k").tenants()
    bad = serve(lambda _n, _req: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
    with pytest.raises(WireError, match="bad chunk size"):
        Connection("127.0.0.1", bad.port, 5).request("GET", "/", None, {}).read()


def test_https_with_a_certificate_the_client_trusts(serve: Callable[..., Server], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"],
                   capture_output=True, check=True)  # fmt: skip
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    srv = serve(lambda _n, _req: length(b'{"items": [{"name": "acme"}], "total": 1}'), tls)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert Remote(f"https://127.0.0.1:{srv.port}", "t0k").tenants() == [{"name": "acme"}]
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "other.pem"))
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tmp_path / "k2"),
                    "-out", str(tmp_path / "other.pem"), "-days", "1", "-subj", "/CN=other"],
                   capture_output=True, check=True)  # fmt: skip
    with pytest.raises(UnavailableError, match="CERTIFICATE_VERIFY_FAILED"):
        Remote(f"https://127.0.0.1:{srv.port}", "t0k").tenants()
