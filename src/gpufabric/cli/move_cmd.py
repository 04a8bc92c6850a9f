"""``gpufabric node move``, ``gpufabric move list|retry|resume`` and ``gpufabric reconcile``."""

from __future__ import annotations

import time
from typing import Any

import typer

from gpufabric.cli.common import JSON_OPT, open_engine, open_store
from gpufabric.cli.output import console, emit_json, escape, jsonable, table
from gpufabric.cli.progress import phase_progress
from gpufabric.domain.errors import GpufabricError
from gpufabric.domain.models import QUARANTINE
from gpufabric.domain.values import check_id

app = typer.Typer(no_args_is_help=True)


def _print_result(result: Any, json_out: bool) -> None:
    data = result.to_dict()
    if json_out:
        emit_json(data)
        return
    for m in data["moves"]:
        console.print(f"move {m['id']}: {m['node']} {m['from']} -> {m['to']}: [bold]{m['status']}[/]")
    table(
        "per-phase timings",
        ["phase", "seconds", "changes", "devices"],
        [
            (
                p["phase"],
                f"{p['seconds']:.3f}",
                p["changes"],
                ", ".join(f"{k} {v:.3f}s" for k, v in p["devices"].items()) or "-",
            )
            for p in data["phases"]
        ],
    )
    console.print(f"total {data['total_seconds']:.3f} s")


def move_node(
    node: str,
    to_tenant: str,
    networks: list[str],
    offering: str,
    dry_run: bool,
    json_out: bool,
    window: float,
    gpus: int | None = None,
) -> None:
    from gpufabric.service.tenancy import LOCAL_OPERATOR, Tenancy

    store = open_store()
    store.node(node)  # "node not found" before anything needs the fabrics
    if dry_run:
        with phase_progress(not json_out) as progress:
            engine = open_engine(progress=progress)
            nets = tuple(networks) or tuple(n.name for n in store.networks(to_tenant)) if to_tenant != QUARANTINE else ()
            plans = engine.preview(node, to_tenant, nets, gpus=gpus, offering=offering)
        if json_out:
            emit_json({k: v.to_dict() for k, v in plans.items()})
        else:
            for phase, p in plans.items():
                console.print(f"[bold]{phase}[/]\n{escape(str(p))}")
        return
    engine = open_engine()
    move = Tenancy(store).move(LOCAL_OPERATOR, node, to_tenant, networks, offering, gpus)
    run_requested(engine, move.id, json_out, window)


def run_requested(engine: Any, move_id: int | None, json_out: bool, window: float = 0.0, wait: float = 600.0) -> None:
    """Run the pending moves (the one just requested among them) here, with live phases; when a
    running worker (``gpufabric serve``) took it first, follow it to its end instead."""
    from gpufabric.domain.moves import MoveStatus

    with phase_progress(not json_out) as progress:
        engine.progress = progress
        result = engine.run_pending(window=window)
        if result is not None and any(m.id == move_id for m in result.moves):
            _print_result(result, json_out)
            return
        m = engine.ledger.get(move_id)
        deadline = time.monotonic() + wait
        while m.status in (MoveStatus.PENDING, MoveStatus.RUNNING) and m.not_before is None:
            engine.progress(m.phase.value, f"move {m.id} {m.status.value} by {m.claimed_by or 'a worker'}")
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
            m = engine.ledger.get(move_id)
    if json_out:
        emit_json({"moves": [jsonable(m)], "phases": []})
    else:
        when = f" (not before {m.not_before.isoformat()})" if m.not_before else ""
        console.print(f"move {m.id}: {escape(m.node)} {escape(m.from_tenant)} -> {escape(m.to_tenant)}: "
                      f"[bold]{m.status.value}[/]{when} (worker {escape(m.claimed_by or '-')})", highlight=False)  # fmt: skip
    if m.status is MoveStatus.FAILED:
        raise GpufabricError(f"move {m.id} failed: {m.error}", move=m.id)


@app.command("list")
def list_moves(json_out: bool = JSON_OPT, open_only: bool = typer.Option(False, "--open")) -> None:
    from gpufabric.service.store_moves import MoveLedger

    ms = MoveLedger(open_store()).moves(open_only)
    if json_out:
        emit_json(jsonable(ms))
    else:
        table(
            f"{len(ms)} moves",
            ["id", "node", "from", "to", "phase", "status", "attempts", "error"],
            [
                (m.id, m.node, m.from_tenant, m.to_tenant, m.phase.value, m.status.value, m.attempts, m.error[:60])
                for m in ms
            ],
        )


@app.command("retry")
def retry(move_id: int, json_out: bool = JSON_OPT) -> None:
    """Re-queue a failed move and run it from the phase where it stopped."""
    check_id("move_id", move_id)
    with phase_progress(not json_out) as progress:
        engine = open_engine(progress=progress)
        engine.ledger.retry(move_id)
        result = engine.run_pending()
    _print_result(result, json_out)


@app.command("resume")
def resume(
    json_out: bool = JSON_OPT,
    stale_after: float = typer.Option(120.0, "--stale-after", help="Take over running moves claimed longer ago (s)."),
    limit: int = typer.Option(64, "--limit", help="At most this many moves in the batch."),
    window: float = typer.Option(0.0, "--window", help="Wait this long first so concurrent requests share the batch."),
) -> None:
    """Run pending moves (one coalesced batch) and take over moves whose worker died (after a crash)."""
    with phase_progress(not json_out) as progress:
        result = open_engine(progress=progress).run_pending(window=window, limit=limit, stale_after=stale_after)
    if result is None:
        emit_json({"moves": [], "phases": []}) if json_out else console.print("nothing to resume")
        return
    _print_result(result, json_out)
