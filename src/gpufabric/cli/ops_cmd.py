"""``gpufabric reconcile`` (one pass, for cron) and ``gpufabric serve`` (REST API + reconcile loop + metrics)."""

from __future__ import annotations

import threading
import time

import typer

from gpufabric.cli.common import JSON_OPT, open_engine, open_store, segment_config
from gpufabric.cli.output import console, emit_json, escape


def reconcile(
    once: bool = typer.Option(True, "--once/--loop", help="One pass (default) or loop every --interval s."),
    policy: str = typer.Option("repair", "--policy", help="repair: fix drift; report: only print it."),
    interval: float = typer.Option(30.0, "--interval"),
    json_out: bool = JSON_OPT,
) -> None:
    """Compare desired (leases, moves) with the fabrics' real state; repair or report the drift."""
    from gpufabric.domain.errors import ValidationError
    from gpufabric.service.reconcile import Policy, reconcile_once

    try:
        pol = Policy(policy)
    except ValueError:
        raise ValidationError("policy", policy, "repair or report") from None
    engine = open_engine()
    while True:
        result = reconcile_once(engine, pol)
        if json_out:
            emit_json(result.to_dict())
        else:
            console.print(
                f"reconcile ({pol.value}): {len(result.drift.lines())} drifted item(s)"
                f"{', repaired' if result.repaired else ''} in {result.seconds:.2f}s"
            )
            for line in result.drift.lines():
                console.print(f"  {escape(line)}")
            for line in result.rogue_sms:
                console.print(f"  rogue SM: {escape(line)}")
            if result.rogue_contained:
                console.print(f"  contained (switch port disabled): {escape(', '.join(result.rogue_contained))}")
        if once:
            return
        time.sleep(interval)


def serve(
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8480, "--port"),
    interval: float = typer.Option(30.0, "--interval", help="Seconds between reconcile passes (0: none)."),
    policy: str = typer.Option("repair", "--policy", help="Reconcile policy of the loop: repair or report."),
    tick: float = typer.Option(0.5, "--tick", help="Seconds between worker ticks (moves, lease expiry)."),
    window: float = typer.Option(0.05, "--window", help="Coalescing window of the worker's move batches (s)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Run the REST API (OpenAPI at /openapi.json), the warm worker (moves as requested, lease
    expiry on time, reconcile passes) and /metrics."""
    import uvicorn

    from gpufabric.api.app import create_app
    from gpufabric.service.reconcile import Policy
    from gpufabric.service.telemetry import Telemetry
    from gpufabric.service.worker import Worker

    telemetry = Telemetry()
    stop = threading.Event()
    engine = open_engine()

    def on_reconcile(result: object) -> None:
        telemetry.record_reconcile(result)  # type: ignore[arg-type]
        telemetry.record_audit(engine, getattr(result, "observed", None))

    worker = Worker(engine, tick=tick, window=window, reconcile_every=interval, policy=Policy(policy),
                    on_reconcile=on_reconcile)  # fmt: skip
    worker.start(stop)
    if json_out:
        emit_json({"listening": f"http://{host}:{port}", "openapi": f"http://{host}:{port}/openapi.json"})
    app = create_app(open_store, segment_config, telemetry.render)
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        stop.set()
