"""``gpufabric node move`` (in-process, or through a running server with ``--api``) and
``gpufabric move list|show|retry|cancel|resume``."""

from __future__ import annotations

import time
from typing import Any

from gpufabric.cli.backend import Terms, backend
from gpufabric.cli.common import JSON_OPT, open_engine
from gpufabric.cli.decl import Argument, Group, Option
from gpufabric.cli.output import console, emit_json, escape, table
from gpufabric.cli.progress import phase_progress
from gpufabric.domain.errors import GpufabricError, ValidationError

app = Group(no_args_is_help=True)


def local_details(store: Any, move_ids: list[int]) -> list[dict[str, Any]]:
    """The moves ``move_ids`` as ``GET /moves/{id}`` answers them (the one move shape)."""
    from gpufabric.domain.auth import LOCAL_ADMIN
    from gpufabric.domain.move_json import move_detail
    from gpufabric.store.queries import Reader

    rd, out = Reader(store), []
    for i in move_ids:
        events, row = rd.move_progress(LOCAL_ADMIN, i)
        if row is not None:
            out.append(move_detail(row, events))
    return out


def _print_result(engine: Any, result: Any, json_out: bool) -> None:
    from gpufabric.domain.move_json import run_json

    data = result.to_dict()
    if json_out:
        ids = [m.id for m in result.moves if m.id is not None]
        emit_json(run_json(local_details(engine.store, ids), data["phases"], data["plans"]))
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


def print_plans(plans: dict[str, Any], json_out: bool, phase: str | None = None) -> None:
    """A preview (``POST /moves/preview``'s answer): each phase's plan, or the one ``phase``."""
    if json_out:
        emit_json(plans["phases"] if phase is None else plans["phases"][phase])
        return
    for k, lines in plans["lines"].items():
        if phase is None or k == phase:
            text = escape("\n".join(lines) or "no changes")
            console.print(text if phase is not None else f"[bold]{k}[/]\n{text}", highlight=False)


def _one(nodes: list[str]) -> str:
    if len(nodes) != 1:
        raise ValidationError("--dry-run", " ".join(nodes), "one node (a preview is per node)")
    return nodes[0]


def run_requested(engine: Any, move_ids: list[int], json_out: bool, window: float = 0.0, wait: float = 600.0) -> None:
    """Run the pending moves (those just requested among them) here, with live phases; when a
    running worker (``gpufabric serve``) took them first, follow them to their end instead."""
    from gpufabric.domain.moves import MoveStatus

    with phase_progress(not json_out) as progress:
        engine.progress = progress
        if window:  # asked for: concurrent requests of other commands share this batch
            time.sleep(window)
        result = engine.run_pending()
        if result is not None and set(move_ids) <= {m.id for m in result.moves}:
            _print_result(engine, result, json_out)
            ms = [m for m in result.moves if m.id in move_ids]
            if not any(m.status is MoveStatus.FAILED for m in ms):
                return
        else:
            ms = _follow_local(engine, move_ids, wait)
            _print_moves(engine, ms, json_out)
    failed = [m for m in ms if m.status is MoveStatus.FAILED]  # one failed alone, the others went on
    if failed:
        raise GpufabricError(f"move {failed[0].id} failed: {failed[0].error}", move=failed[0].id)


def _follow_local(engine: Any, move_ids: list[int], wait: float) -> list[Any]:
    """Wait until another worker (``gpufabric serve``) ends the moves ``move_ids``; their last state."""
    from gpufabric.domain.moves import MoveStatus

    deadline = time.monotonic() + wait
    ms = [engine.ledger.get(i) for i in move_ids]
    while any(m.status in (MoveStatus.PENDING, MoveStatus.RUNNING) and m.not_before is None for m in ms):
        m = next(m for m in ms if m.status in (MoveStatus.PENDING, MoveStatus.RUNNING))
        engine.progress(m.phase.value, f"move {m.id} {m.status.value} by {m.claimed_by or 'a worker'}")
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
        ms = [engine.ledger.get(i) for i in move_ids]
    return ms


def _print_moves(engine: Any, ms: list[Any], json_out: bool) -> None:
    if json_out:  # run by another worker: the run as the API shows it
        from gpufabric.domain.move_json import run_json

        emit_json(run_json(local_details(engine.store, [m.id for m in ms if m.id is not None])))
        return
    for m in ms:
        when = f" (not before {m.not_before.isoformat()})" if m.not_before else ""
        console.print(f"move {m.id}: {escape(m.node)} {escape(m.from_tenant)} -> {escape(m.to_tenant)}: "
                      f"[bold]{m.status.value}[/]{when} (worker {escape(m.claimed_by or '-')})", highlight=False)  # fmt: skip


def follow_remote(r: Any, move_ids: list[int], json_out: bool) -> None:
    """Show the moves' phases as the server's worker runs them (server-sent events), then their end."""
    details = [_follow(r, i, json_out) for i in move_ids]
    if json_out:  # the run as the local CLI prints it (who ran it decides only what is known)
        from gpufabric.domain.move_json import run_json

        emit_json(run_json(details))
    else:
        for d in details:
            _print_detail(d)
    _raise_failed(details)


def _follow(r: Any, move_id: int, json_out: bool) -> dict[str, Any]:
    """Follow a move's server-sent events (progress shown) until it ends; its detail: the stream
    carries every event and the move's last row, so a finished move needs no GET of it."""
    import json

    from gpufabric.domain.move_json import FINISHED, move_detail

    events: list[dict[str, Any]] = []
    row: dict[str, Any] | None = None
    with phase_progress(not json_out) as progress, r.stream(f"/moves/{move_id}/events") as resp:
        kind = ""
        for line in resp.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: ") and kind == "progress":
                e = json.loads(line[6:])
                events.append(e)
                progress(e["phase"], e["message"])  # type: ignore[operator]
            elif line.startswith("data: ") and kind == "move":
                row = json.loads(line[6:])
    if row is not None and row.get("status") in FINISHED:
        return move_detail(row, events)  # what GET /moves/{id} answers (api/v1/moves.detail)
    detail: dict[str, Any] = r.get(f"/moves/{move_id}")  # the stream timed out or was cut
    return detail


def _raise_failed(details: list[dict[str, Any]]) -> None:
    for d in details:
        if d.get("status") == "failed":
            raise GpufabricError(f"move {d['id']} failed: {d.get('error', '')}", move=d["id"])


def _print_detail(d: dict[str, Any]) -> None:
    console.print(f"move {d['id']}: {escape(d['node'])} {escape(d['from_tenant'])} -> {escape(d['to_tenant'])}: "
                  f"[bold]{d['status']}[/] at {d['phase']}", highlight=False)  # fmt: skip
    if d["error"]:
        console.print(f"error: {d['error']}", highlight=False, markup=False)
    table("phases", ["phase", "seconds"], [(k, f"{v:.3f}") for k, v in d["timings"].items()])


@app.command("show")
def show(move_id: int = Argument(..., min=1, max=2**31 - 1), json_out: bool = JSON_OPT) -> None:
    """One move with its phases, progress messages and timings."""
    d = backend().move(move_id)
    emit_json(d) if json_out else _print_detail(d)


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
    _print_result(engine, result, json_out)


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
    _print_result(engine, result, json_out)
