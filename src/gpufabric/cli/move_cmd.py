"""``gpufabric node move`` (in-process, or through a running server with ``--api``) and
``gpufabric move list|show|retry|cancel|resume``."""

from __future__ import annotations

import time

from gpufabric.cli.backends.base import Terms
from gpufabric.cli.backends.choose import backend
from gpufabric.cli.common import JSON_OPT, open_engine
from gpufabric.cli.decl import Argument, Group, Option
from gpufabric.cli.move_run import print_detail, print_plans, print_result
from gpufabric.cli.output import console, emit_json, escape, table
from gpufabric.cli.progress import phase_progress
from gpufabric.domain.errors import ValidationError

app = Group(no_args_is_help=True)


def move_nodes(
    nodes: list[str],
    to_tenant: str,
    networks: list[str],
    offering: str,
    dry_run: bool,
    json_out: bool,
    window: float,
    lease_terms: tuple[tuple[str, int], ...] = (),
) -> None:
    """``node move``: requested here or through the server (``--api``: its worker runs them),
    then run or followed to their end; ``--dry-run``: each phase's plan, nothing changed.
    ``lease_terms``: the new leases' terms given (``domain.terms``)."""
    b = backend()
    terms = Terms(to_tenant, tuple(networks) or None, offering, lease_terms)  # no --network: every network of the tenant
    if dry_run:
        node = _one(nodes)
        with phase_progress(not json_out) as progress:
            plans = b.preview(node, terms, progress=progress)
        print_plans(plans, json_out)
        return
    b.run(b.request_moves(nodes, terms), json_out, window)


def _one(nodes: list[str]) -> str:
    if len(nodes) != 1:
        raise ValidationError("--dry-run", " ".join(nodes), "one node (a preview is per node)")
    return nodes[0]


@app.command("show")
def show(move_id: int = Argument(..., min=1, max=2**31 - 1), json_out: bool = JSON_OPT) -> None:
    """One move with its phases, progress messages and timings."""
    d = backend().move(move_id)
    emit_json(d) if json_out else print_detail(d)


@app.command("list")
def list_moves(json_out: bool = JSON_OPT, open_only: bool = Option(False, "--open")) -> None:
    """Every move, newest first, as ``GET /moves`` shows it (``--open``: pending, running, failed or offered)."""
    from gpufabric.domain.move_json import OPEN

    data = backend().moves()
    if open_only:
        data = [m for m in data if m["status"] in OPEN]
    emit_json(data) if json_out else table(
        f"{len(data)} moves",
        ["id", "node", "from", "to", "phase", "status", "attempts", "error"],
        [(m["id"], m["node"], m["from_tenant"], m["to_tenant"], m["phase"], m["status"], m["attempts"], m["error"][:60])
         for m in data],
    )  # fmt: skip


@app.command("retry")
def retry(move_id: int, json_out: bool = JSON_OPT) -> None:
    """Re-queue a failed move and run it from the phase where it stopped."""
    from gpufabric.domain.values import check_id  # (not at import: node move through --api never needs it)

    check_id("move_id", move_id)
    with phase_progress(not json_out) as progress:
        engine = open_engine(progress=progress)
        engine.ledger.retry(move_id)
        result = engine.run_pending()
    print_result(engine, result, json_out)


@app.command("cancel")
def cancel(move_id: int, json_out: bool = JSON_OPT) -> None:
    """Cancel a pending (or scheduled) or failed move; a running one is refused. Never started:
    its node stays in its tenant. Started (failed): its node returns to quarantine."""
    from gpufabric.domain.values import check_id  # (not at import: node move through --api never needs it)

    check_id("move_id", move_id)
    d, events = backend().cancel_move(move_id)
    said = next((e["message"] for e in reversed(events) if e["phase"] == "cancel"), "")
    if json_out:
        emit_json({**d, "message": said})
        return
    console.print(f"move {d['id']}: {escape(d['node'])} {escape(d['from_tenant'])} -> {escape(d['to_tenant'])}: "
                  f"[bold]{d['status']}[/] ({escape(said)})", highlight=False)  # fmt: skip


@app.command("resume")
def resume(
    json_out: bool = JSON_OPT,
    stale_after: float = Option(120.0, "--stale-after", help="Take over running moves claimed longer ago (s)."),
    limit: int = Option(64, "--limit", help="At most this many moves in the batch."),
    window: float = Option(0.0, "--window", help="Wait this long first so concurrent requests share the batch."),
) -> None:
    """Run pending moves (one coalesced batch) and take over moves whose worker died (after a crash)."""
    from gpufabric.domain.move_json import run_json

    with phase_progress(not json_out) as progress:
        engine = open_engine(progress=progress)
        if window:
            time.sleep(window)
        result = engine.run_pending(limit=limit, stale_after=stale_after)
    if result is None:
        emit_json(run_json([])) if json_out else console.print("nothing to resume")
        return
    print_result(engine, result, json_out)
