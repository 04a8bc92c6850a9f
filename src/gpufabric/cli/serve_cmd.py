"""``gpufabric serve``: the REST API v1, the dashboard, the move worker and the reconcile
loop, ``/healthz``, ``/readyz`` and ``/metrics``.

Secure by default: it binds to loopback; any other address is refused unless TLS
(``--tls-cert``/``--tls-key``) is configured and at least one API token exists. Request
bodies, writes per principal and event streams are limited (``--max-body``, ``--write-rate``,
``--max-streams``, ...). ``/metrics`` and the detailed ``/readyz`` need an admin token, or
``--probe-bind`` serves them openly on a second, loopback-only listener. The loops retry on
errors (backoff) and report them in ``/metrics`` and ``/readyz``. This module reads the options
and serves the API; the worker and the loops are :mod:`gpufabric.runtime.server`'s.
"""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime
from pathlib import Path

from gpufabric.cli.common import (
    JSON_OPT,
    fabrics_path,
    fabrics_yaml,
    network_kinds,
    open_store,
    quota_config,
    segment_config,
)
from gpufabric.cli.decl import Option
from gpufabric.cli.output import emit_json, err_console
from gpufabric.domain.errors import ConfigError
from gpufabric.runtime.move_worker import DEFAULT_WINDOW
from gpufabric.transport.secrets import owner_only


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, cert: Path | None, key: Path | None, tokens: int) -> None:
    """Refuse a non-loopback bind without TLS and auth (at least one active token), and a
    private key group or others may read (:func:`owner_only`)."""
    if (cert is None) != (key is None):
        raise ConfigError("tls", f"cert={cert} key={key}", "both --tls-cert and --tls-key, or neither")
    for p in (cert, key):
        if p is not None and not p.is_file():
            raise ConfigError("tls", str(p), "a readable PEM file")
    if key is not None:
        owner_only("tls_key", key, key.stat().st_mode)
    if _loopback(host):
        return
    if cert is None:
        raise ConfigError("host", host, "a loopback address (127.0.0.1, ::1) unless --tls-cert and --tls-key are given")
    if tokens == 0:
        raise ConfigError("host", host, "a loopback address until an API token exists (gpufabric token create)")


def parse_probe_bind(raw: str) -> tuple[str, int]:
    """``--probe-bind HOST:PORT`` (loopback only: the listener checks no token)."""
    host, sep, port = raw.rpartition(":")
    host = host.strip("[]")
    allowed = "HOST:PORT on a loopback address, e.g. 127.0.0.1:9480 (it serves /metrics without a token)"
    if not sep or not port.isdigit() or not 1 <= int(port) <= 65535 or not _loopback(host):
        raise ConfigError("probe_bind", raw, allowed)
    return host, int(port)


def serve(
    host: str = Option("127.0.0.1", "--host"),
    port: int = Option(8480, "--port", min=1, max=65535),
    interval: float = Option(30.0, "--interval", help="Seconds between reconcile passes (0: no loop)."),
    policy: str = Option("repair", "--policy", help="Reconcile policy of the loop: repair or report."),
    window: float = Option(DEFAULT_WINDOW, "--window", help="Seconds the move worker waits before a claim while another "
                           "replica's batch runs, so that requests arriving meanwhile share its batch (a lone "
                           "move is claimed at once; moves that arrive while a batch runs share the next one)."),
    poll: float = Option(0.5, "--worker-poll", "--tick", help="Seconds between the worker's ticks (queued moves, ended leases)."),
    heartbeat: float = Option(5.0, "--heartbeat", min=0.05, help="Seconds between the worker's heartbeats of "
                              "the moves it runs; another replica takes a move over after 3 missed (s)."),
    tls_cert: Path = Option(None, "--tls-cert", help="PEM certificate (required off loopback)."),
    tls_key: Path = Option(None, "--tls-key", help="PEM private key (required off loopback)."),
    max_body: int = Option(1024 * 1024, "--max-body", help="Bytes of a request body at most (413 past it)."),
    max_inventory_body: int = Option(64 * 1024 * 1024, "--max-inventory-body",
                                     help="Bytes of a POST /api/v1/inventory body at most (admins: the roles that import)."),
    large_bodies: int = Option(1, "--large-bodies", help="Inventory bodies past --max-body read and parsed at once "
                               "(each takes ~20x its size in memory; the others wait)."),
    write_rate: float = Option(10.0, "--write-rate", help="Writes per second per principal (0: no limit; 429)."),
    write_burst: int = Option(100, "--write-burst", help="Writes a principal may make at once."),
    limit_admin: bool = Option(False, "--limit-admin-writes", help="Rate-limit admin tokens' writes too."),
    max_streams: int = Option(8, "--max-streams", help="Open event streams per principal (429 past it)."),
    stream_timeout: float = Option(1800.0, "--stream-timeout", help="Seconds an event stream stays open at most."),
    probe_bind: str = Option("", "--probe-bind", help="HOST:PORT (loopback) of a second listener serving "
                             "/metrics and the detailed /readyz without a token (for Prometheus)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Run the REST API v1 (OpenAPI at /openapi.json), the dashboard (/), the move worker,
    the reconcile loop, /healthz, /readyz and /metrics."""
    import uvicorn

    from gpufabric.api.app import create_app, create_probe_app
    from gpufabric.api.deps import ApiContext
    from gpufabric.api.limits import ApiLimits
    from gpufabric.engine.columns import configured_kinds
    from gpufabric.engine.reconcile import Policy
    from gpufabric.runtime.server import ServerLoops
    from gpufabric.store.auth import Tokens

    try:
        pol = Policy(policy)
    except ValueError:
        raise ConfigError("policy", policy, "repair or report") from None
    limits = ApiLimits(max_body=max_body, max_inventory_body=max_inventory_body, large_bodies=large_bodies, write_rate=write_rate,
                       write_burst=write_burst, limit_admin=limit_admin, streams_per_principal=max_streams,
                       stream_timeout=stream_timeout).check()
    probe = parse_probe_bind(probe_bind) if probe_bind else None
    store = open_store()
    now = datetime.now(UTC)
    active = [t for t in Tokens(store).list() if t.revoked_at is None and (t.expires_at is None or t.expires_at > now)]
    check_bind(host, tls_cert, tls_key, len(active))
    server = ServerLoops(store, fabrics_path(), segment_config, pol, interval, window, poll, heartbeat, err_console.print)
    has_fabrics = server.has_fabrics
    columns = configured_kinds(fabrics_path())  # the nodes' fabric columns: the configured instances
    ctx = ApiContext(
        store, segment_config, server.engine if has_fabrics else None, server.loops, limits=limits,
        quota_config=quota_config, view_kinds=lambda: columns, network_kinds=lambda: network_kinds(fabrics_path()),
        fabrics_settings=fabrics_yaml,
    )
    ctx.metrics = server.metrics
    server.start(ctx)
    scheme = "https" if tls_cert else "http"
    if json_out:
        emit_json({"listening": f"{scheme}://{host}:{port}", "openapi": f"{scheme}://{host}:{port}/openapi.json",
                   "worker": has_fabrics, "probes": f"http://{probe[0]}:{probe[1]}" if probe else None})
    app = create_app(ctx)
    import threading

    threading.Thread(target=app.openapi, name="openapi-warm", daemon=True).start()  # ~1.5 s of CPU, off the first GET
    probe_server = None
    if probe is not None:
        probe_server = uvicorn.Server(uvicorn.Config(create_probe_app(ctx), host=probe[0], port=probe[1],
                                                     log_level="warning"))
        threading.Thread(target=probe_server.run, name="probe-listener", daemon=True).start()
    try:
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level="warning",
            ssl_certfile=str(tls_cert) if tls_cert else None,
            ssl_keyfile=str(tls_key) if tls_key else None,
        )
    finally:
        if probe_server is not None:
            probe_server.should_exit = True
        server.stop()
