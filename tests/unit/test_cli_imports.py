"""A command through ``--api`` imports neither the store (SQLAlchemy), an HTTP library (httpx, nor
``http.client`` and the ``email`` package it parses headers with), typer, the fabric packages nor
the service layer: run in a fresh interpreter against a refused port and
against a tiny local server, then read its ``sys.modules`` (bench/bench_cli.py times it)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from support.cli_probe import probe

FORBIDDEN = ("sqlalchemy", "httpx", "httpcore", "alembic", "fastapi", "gpufabric.fabrics", "gpufabric.service",
             "gpufabric.lab", "yaml")  # fmt: skip
FAST = ("typer", "http.client", "email")  # nor, on the fast path (cli/fast.py, cli/decl.py, cli/wire.py), these
run = probe


def forbidden(modules: list[str], also: tuple[str, ...] = ()) -> list[str]:
    return [m for m in modules if any(m == f or m.startswith(f + ".") for f in (*FORBIDDEN, *also))]


def refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: nothing listens there


@pytest.fixture
def tiny_api() -> Iterator[str]:
    """Answers ``GET /api/v1/nodes`` with no nodes and every other path with the API's 404."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.headers.get("Authorization") != "Bearer t0k":
                status, body = 401, {"error": {"code": "unauthorized", "field": None, "value": None, "allowed": None,
                                               "message": "no valid bearer token"}}  # fmt: skip
            elif self.path.startswith("/api/v1/nodes?"):
                status, body = 200, {"items": [], "total": 0, "limit": 1000, "offset": 0}
            else:
                status, body = 404, {"error": {"code": "not_found", "field": "node", "value": "gpu-x",
                                               "allowed": None, "message": "node not found: gpu-x"}}  # fmt: skip
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *a: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize(("cmd", "fast"), [
    (("node", "list"), True), (("node", "move", "gpu-a01", "--to-tenant", "beta"), True), (("lease", "list"), True),
    (("tenant", "list"), True), (("move", "list"), True), (("move", "show", "3"), False), (("events",), False),
    (("token", "list"), True)])  # fmt: skip  # fast: read by cli/fast.py (the others check their values with typer)
def test_a_command_through_a_refused_api_imports_no_store_no_fabric_no_httpx(cmd: tuple[str, ...], fast: bool) -> None:
    code, modules, out = run("--api", f"http://127.0.0.1:{refused_port()}", "--token", "t0k", *cmd, "--json")
    assert code == 2
    assert json.loads(out)["error"]["code"] == "unavailable"
    assert forbidden(modules, FAST if fast else ()) == []
    assert "rich" not in modules  # --json prints no table


def test_node_move_through_the_api_starts_without_dataclasses() -> None:
    """The command the served-move bench times (bench/bench_cli.py), with a lease term: ``dataclasses``
    imports ``inspect`` (~5 ms of its start), so it reads no domain module built on them
    (``domain.lease_terms``, not ``domain.terms``)."""
    code, modules, out = run("--api", f"http://127.0.0.1:{refused_port()}", "--token", "t0k", "node", "move", "gpu-a01",
                             "--to-tenant", "beta", "--gpus", "2", "--json")  # fmt: skip
    assert code == 2 and json.loads(out)["error"]["code"] == "unavailable"
    assert forbidden(modules, (*FAST, "dataclasses", "inspect")) == []


def test_a_command_through_a_live_api_imports_no_store_and_maps_its_errors(tiny_api: str) -> None:
    code, modules, out = run("--api", tiny_api, "--token", "t0k", "node", "list", "--json")
    assert (code, json.loads(out)) == (0, [])
    assert forbidden(modules, FAST) == []
    code, modules, out = run("--api", tiny_api, "--token", "t0k", "node", "show", "gpu-x", "--json")
    assert code == 2 and forbidden(modules, FAST) == []
    assert json.loads(out)["error"] == {"code": "not_found", "field": "node", "value": "gpu-x", "allowed": None,
                                        "message": "node not found: gpu-x"}  # fmt: skip
    code, _, out = run("--api", tiny_api, "--token", "wrong", "node", "list")
    assert code == 2 and "no valid bearer token" in out


def test_a_local_command_still_loads_what_it_uses(tmp_path: Path) -> None:
    """The control: the same command without --api opens the store (SQLAlchemy)."""
    code, modules, _ = run("tenant", "list", "--json", home=str(tmp_path))
    assert code == 0 and "sqlalchemy" in modules
