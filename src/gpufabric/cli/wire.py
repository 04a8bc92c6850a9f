"""HTTP/1.1 over one socket, for the CLI's ``--api`` path (:class:`gpufabric.cli.backends.remote.Remote`).

``http.client`` imports the ``email`` package to parse headers, and ``ssl`` even for plain
http: about a quarter of a command's start (bench/bench_cli.py). This module speaks the
subset the API and the proxies in front of it use: a request with a body of known length
(``Content-Length``), and an answer with ``Content-Length``, ``chunked`` or close-delimited
body, read whole (:meth:`Answer.read`) or line by line as it arrives (an event stream:
iterate the answer). A connection is kept alive between requests unless the server says
otherwise. ``ssl`` is imported only for https.

Errors are ``OSError``: the socket's own (refused, timed out, TLS), or :class:`WireError`
for an answer that is not HTTP/1.x; a kept-alive connection the server closed before
answering is :class:`RemoteClosed` (a ``ConnectionResetError``), which the caller retries.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    import ssl

MAX_LINE = 65536  # bytes of a status or header line, or of a chunk-size line, at most
MAX_HEADERS = 100


class WireError(ConnectionError):
    """The server's answer is not HTTP/1.x as this module reads it."""


class RemoteClosed(ConnectionResetError):
    """The server closed the connection without answering (a kept-alive connection it timed out)."""


class Answer:
    """One answer: ``status``, ``headers`` (lower-case names), then its body, read once."""

    def __init__(self, status: int, headers: dict[str, str], body: Iterator[bytes], will_close: bool) -> None:
        self.status, self.headers, self._body, self.will_close = status, headers, body, will_close

    def read(self) -> bytes:
        """The whole body."""
        return b"".join(self._body)

    def __iter__(self) -> Iterator[bytes]:
        """The body's lines as they arrive, each with its line ending (the last one may have none)."""
        rest = b""
        for data in self._body:
            rest += data
            *lines, rest = rest.split(b"\n")
            for line in lines:
                yield line + b"\n"
        if rest:
            yield rest


class Connection:
    """One HTTP/1.1 connection to ``host:port`` (TLS with ``tls``), opened at the first request."""

    def __init__(self, host: str, port: int | None, timeout: float | None, tls: ssl.SSLContext | None = None) -> None:
        self.host, self.timeout, self.tls = host, timeout, tls
        self.port = port or (443 if tls is not None else 80)
        name = f"[{host}]" if ":" in host else host
        self.authority = name if port is None or port == (443 if tls is not None else 80) else f"{name}:{port}"
        self._sock: socket.socket | None = None
        self._file: IO[bytes] | None = None

    def _open(self) -> IO[bytes]:
        # getaddrinfo takes the host's bytes too: a str host loads the idna codec for the same bytes
        host: str | bytes = self.host.encode("ascii") if self.host.isascii() else self.host
        sock = socket.create_connection((host, self.port), self.timeout)  # type: ignore[arg-type]
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as http.client does
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        self._sock, self._file = sock, sock.makefile("rb")
        return self._file

    def close(self) -> None:
        for x in (self._file, self._sock):
            if x is not None:
                x.close()
        self._sock = self._file = None

    def request(self, method: str, target: str, body: bytes | None, headers: dict[str, str]) -> Answer:
        """Send one request and read the answer's status line and headers (its body is read
        from the answer, and must be before the next request on this connection)."""
        f = self._file or self._open()
        assert self._sock is not None
        head = [f"{method} {target} HTTP/1.1", f"Host: {self.authority}", "Accept-Encoding: identity"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head.append(f"Content-Length: {len(body or b'')}")
        self._sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b""))
        while True:
            status, version = self._status(f)
            headers_in = self._headers(f)
            if not 100 <= status < 200:
                break  # an interim answer (100 Continue) is followed by the real one
        conn = headers_in.get("connection", "").lower()
        will_close = "close" in conn or (version == "HTTP/1.0" and "keep-alive" not in conn)
        if method == "HEAD" or status in (204, 304):
            return Answer(status, headers_in, iter(()), will_close)
        if "chunked" in headers_in.get("transfer-encoding", "").lower():
            return Answer(status, headers_in, self._chunked(f), will_close)
        if "content-length" in headers_in:
            try:
                n = int(headers_in["content-length"])
            except ValueError:
                raise WireError(f"bad Content-Length: {headers_in['content-length']!r}") from None
            return Answer(status, headers_in, self._exactly(f, n), will_close)
        return Answer(status, headers_in, self._to_close(f), True)

    @staticmethod
    def _line(f: IO[bytes]) -> bytes:
        line = f.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise WireError("a line of the answer is too long")
        return line

    def _status(self, f: IO[bytes]) -> tuple[int, str]:
        line = self._line(f)
        if not line:
            raise RemoteClosed("Remote end closed connection without response")
        version, _, rest = line.decode("latin-1").rstrip("\r\n").partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise WireError(f"not an HTTP/1.x answer: {line[:80]!r}")
        return int(code), version

    def _headers(self, f: IO[bytes]) -> dict[str, str]:
        out: dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            line = self._line(f)
            if line in (b"\r\n", b"\n", b""):
                return out
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep:
                raise WireError(f"bad header line: {line[:80]!r}")
            key = name.strip().lower()
            out[key] = f"{out[key]}, {value.strip()}" if key in out else value.strip()
        raise WireError(f"more than {MAX_HEADERS} headers")

    def _exactly(self, f: IO[bytes], n: int) -> Iterator[bytes]:
        data = f.read(n)
        if len(data) < n:
            self.close()
            raise WireError(f"the answer ended after {len(data)} of {n} bytes")
        yield data

    def _to_close(self, f: IO[bytes]) -> Iterator[bytes]:
        while data := f.read1(65536):  # type: ignore[attr-defined]  # a BufferedReader
            yield data
        self.close()

    def _chunked(self, f: IO[bytes]) -> Iterator[bytes]:
        while True:
            size_line = self._line(f)
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                self.close()
                raise WireError(f"bad chunk size: {size_line[:80]!r}") from None
            if size == 0:
                while self._line(f) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return
            data = f.read(size)
            if len(data) < size or self._line(f) not in (b"\r\n", b"\n"):
                self.close()
                raise WireError("the answer ended inside a chunk")
            yield data
