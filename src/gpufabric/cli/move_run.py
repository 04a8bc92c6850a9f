"""A move's run as the CLI shows it: run here with live phases (or followed when a running worker
took it first), followed through a server's event stream (``--api``), its plans previewed, and
its result printed — the same lines and ``--json`` either way. Both backends and the move
commands use it (:mod:`gpufabric.cli.backends`, :mod:`gpufabric.cli.move_cmd`)."""

from __future__ import annotations

import time
from typing import Any

from gpufabric.cli.output import console, emit_json, escape, table
from gpufabric.cli.progress import phase_progress
from gpufabric.domain.errors import GpufabricError


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


def print_result(engine: Any, result: Any, json_out: bool) -> None:
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


def print_plans(plans: dict[str, Any], json_out: bool, phase: str | None = None) -> None:
    """A preview (``POST /moves/preview``'s answer): each phase's plan, or the one ``phase``."""
    if json_out:
        emit_json(plans["phases"] if phase is None else plans["phases"][phase])
        return
    for k, lines in plans["lines"].items():
        if phase is None or k == phase:
            text = escape("\n".join(lines) or "no changes")
            console.print(text if phase is not None else f"[bold]{k}[/]\n{text}", highlight=False)


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
            print_result(engine, result, json_out)
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
            print_detail(d)
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


def print_detail(d: dict[str, Any]) -> None:
    console.print(f"move {d['id']}: {escape(d['node'])} {escape(d['from_tenant'])} -> {escape(d['to_tenant'])}: "
                  f"[bold]{d['status']}[/] at {d['phase']}", highlight=False)  # fmt: skip
    if d["error"]:
        console.print(f"error: {d['error']}", highlight=False, markup=False)
    table("phases", ["phase", "seconds"], [(k, f"{v:.3f}") for k, v in d["timings"].items()])
