"""``gpufabric serve``: the REST API v1, the dashboard, the move worker and the reconcile
loop, ``/healthz``, ``/readyz`` and ``/metrics``.

Secure by default: it binds to loopback; any other address is refused unless TLS
(``--tls-cert``/``--tls-key``) is configured and at least one API token exists. Request
bodies, writes per principal and event streams are limited (``--max-body``, ``--write-rate``,
``--max-streams``, ...). ``/metrics`` and the detailed ``/readyz`` need an admin token, or
``--probe-bind`` serves them openly on a second, loopback-only listener. The loops retry on
errors (backoff) and report them in ``/metrics`` and ``/readyz``.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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

LEADER_BEAT = 1.0  # seconds between a standby's tries for the loops' lock (and the leader's check it holds it)


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
    from gpufabric.engine.reconcile import Policy, reconcile_once
    from gpufabric.runtime.loops import WATCH_INTERVAL, Loops, MoveProgress, RogueWatch, loop_metrics
    from gpufabric.runtime.move_worker import MoveWorker
    from gpufabric.runtime.telemetry import Cached, Telemetry, fabric_metrics
    from gpufabric.store.auth import Tokens
    from gpufabric.store.loop_leader import LoopLeader

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
    telemetry = Telemetry()
    loops = Loops(on_error=lambda name, e: err_console.print(f"{name} pass failed (will retry): {e}"))
    has_fabrics = fabrics_path().exists()
    worker_id = f"{os.uname().nodename}:{os.getpid()}:serve"
    progress = MoveProgress(store, worker_id)
    leader = LoopLeader(store)  # reconcile and the rogue-SM watch: one replica at a time

    def engine(**kw: Any) -> Any:
        from gpufabric.engine.fabrics import Fabrics
        from gpufabric.engine.moves import MoveEngine
        from gpufabric.store.registry import Registry

        cfg = segment_config()
        fabrics = Fabrics.load(fabrics_path(), Registry.from_entry_points(), cfg)
        return MoveEngine(store, fabrics, cfg, **kw)

    from gpufabric.engine.columns import configured_kinds

    columns = configured_kinds(fabrics_path())  # the nodes' fabric columns: the configured instances
    ctx = ApiContext(
        store, segment_config, engine if has_fabrics else None, loops, limits=limits, quota_config=quota_config,
        view_kinds=lambda: columns, network_kinds=lambda: network_kinds(fabrics_path()), fabrics_settings=fabrics_yaml,
    )
    progress.on_record = ctx.ring  # a follower's event stream hears this worker's progress at once
    def read_fabric_series() -> str:
        e = engine()
        try:
            return fabric_metrics(e)
        finally:
            e.fabrics.close()

    def no_series() -> str:
        return ""

    fabric_series: Callable[[], str] = Cached(read_fabric_series) if has_fabrics else no_series
    def leader_series() -> str:
        return f"# TYPE gpufabric_loops_leader gauge\ngpufabric_loops_leader {int(leader.held)}\n"

    ctx.metrics = lambda: telemetry.render() + loop_metrics(loops) + fabric_series() + leader_series()
    engines: dict[str, Any] = {}

    def warm() -> Any:
        """One long-lived engine for the worker and the reconcile loop: its last verified state
        spares a read of every fabric per phase (the fabric lock serialises the two)."""
        if "warm" not in engines:
            engines["warm"] = engine(worker=worker_id, progress=progress, settle=progress.flush, heartbeat_every=heartbeat)
        return engines["warm"]

    def take_converge() -> bool:
        asked, ctx.converge_requested = ctx.converge_requested, False
        return asked

    worker_pass = MoveWorker(store, warm, progress, window, take_converge)

    def reconcile_pass() -> None:
        if not leader.held:
            return  # a standby: the leader's loop repairs (see leader_pass)
        e = warm()
        result = reconcile_once(e, pol, resume_moves=False)
        telemetry.record_reconcile(result)
        report = telemetry.record_audit(e, result.observed)
        ctx.set_audit(report)
        ctx.last_reconcile = {"at": datetime.now(UTC).isoformat(), **result.to_dict()}

    def leader_pass() -> None:
        """Take the loops' lock when free (a standby replaces a dead leader within one beat)."""
        was = leader.held
        if leader.try_lead() and not was:
            err_console.print(f"{worker_id}: leads the reconcile loop and the rogue-SM watch")
            loops.wake("reconcile")

    if has_fabrics:
        loops.start("worker", worker_pass, poll, wait=lambda tick: warm().idle_wait(tick))
        if interval > 0:
            leader_pass()
            loops.start("leader", leader_pass, LEADER_BEAT)
            loops.start("reconcile", reconcile_pass, interval)
            watch = RogueWatch(  # rogue SMs in seconds, not at the next reconcile pass
                lambda: loops.wake("reconcile"),
                on_suspect=lambda f: err_console.print(f"sm-watch: {'; '.join(f)[:300]}: reconcile now"),
            )
            loops.start("sm-watch", lambda: watch.run(warm().fabrics.backends) if leader.held else (), WATCH_INTERVAL)
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
        loops.shutdown()
        leader.release()
