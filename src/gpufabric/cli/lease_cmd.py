"""``gpufabric lease create|list|delete``: leases of nodes to tenants (as in ESI: owner and lessee)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import typer

from gpufabric.cli.backend import ALL, backend, items
from gpufabric.cli.common import JSON_OPT, actions, fabrics_path, open_engine, reader
from gpufabric.cli.output import console, emit_json, table
from gpufabric.cli.progress import phase_progress
from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.errors import ValidationError
from gpufabric.domain.models import Lease

app = typer.Typer(no_args_is_help=True)


def parse_time(field: str, raw: str | None) -> datetime | None:
    if not raw:
        return None
    try:
        t = datetime.fromisoformat(raw)
    except ValueError:
        raise ValidationError(field, raw, "ISO 8601 date-time, e.g. 2026-12-01T09:00:00Z") from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


@app.command("create")
def create(
    tenant: str = typer.Option(..., "--tenant"),
    node: str = typer.Option(..., "--node"),
    network: list[str] = typer.Option([], "--network", help="Tenant network(s) the node joins (repeatable)."),
    offering: str = typer.Option("baremetal", "--offering"),
    start: str = typer.Option(None, "--start", help="ISO time (default now)."),
    end: str = typer.Option(None, "--end", help="ISO time; when it passes the node goes to quarantine."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; change nothing."),
    json_out: bool = JSON_OPT,
) -> None:
    """Lease a node to a tenant and, when it starts now, apply it on every fabric (verified)."""
    lease = Lease(
        tenant=tenant,
        node=node,
        start=parse_time("start", start) or datetime.now(UTC),
        end=parse_time("end", end),
        networks=tuple(network),
        offering=offering,
    )
    r = backend()
    if dry_run:
        if r:
            plans = r.post("/moves/preview", {"node": node, "to_tenant": tenant, "networks": list(network)})["phases"]
            emit_json(plans["join"]) if json_out else console.print(plans["join"])
            return
        _print_plan(open_engine().preview(node, tenant, tuple(network))["join"], json_out)
        return
    if r:
        body = {"tenant": tenant, "node": node, "networks": list(network), "offering": offering,
                "start": lease.start.isoformat(), "end": lease.end.isoformat() if lease.end else None}
        created = r.post("/leases", body)
        applied = None  # the server's worker applies it
    else:
        made = actions().create_lease(LOCAL_ADMIN, tenant, node, lease.networks, offering, lease.start, lease.end)
        created = reader().leases(LOCAL_ADMIN, 1, 0, lease_id=made.id)[0][0]
        applied = _apply_now("lease", json_out) if made.active_at(datetime.now(UTC)) else None
    if json_out:
        emit_json({**created, "applied": applied})
    else:
        console.print(f"lease {created['id']}: {created['node']} -> {created['tenant']} ({created['offering']})")


@app.command("list")
def list_leases(json_out: bool = JSON_OPT) -> None:
    r = backend()
    ls = items(r.get("/leases", limit=1000)) if r else reader().leases(LOCAL_ADMIN, ALL, 0)[0]
    if json_out:
        emit_json(ls)
        return
    table(
        f"{len(ls)} leases",
        ["id", "node", "tenant", "offering", "networks", "start", "end"],
        [
            (x["id"], x["node"], x["tenant"], x["offering"], ",".join(x["networks"]), x["start"][:19], (x["end"] or "-")[:19])
            for x in ls
        ],
    )


@app.command("delete")
def delete(lease_id: int = typer.Argument(..., min=1, max=2**31 - 1), json_out: bool = JSON_OPT) -> None:
    """End a lease now: the node goes to quarantine on every fabric (verified). The lease stays in the history."""
    r = backend()
    if r:
        gone = r.delete(f"/leases/{lease_id}")
        applied = None
    else:
        actions().end_lease(LOCAL_ADMIN, lease_id)
        found = reader().leases(LOCAL_ADMIN, 1, 0, lease_id=lease_id)[0]
        gone = found[0] if found else {"id": lease_id, "node": "-", "tenant": "-"}
        applied = _apply_now("release", json_out)
    if json_out:
        emit_json({**gone, "applied": applied})
    else:
        console.print(f"lease {gone['id']} ended ({gone['node']} leaves {gone['tenant']})")


def _print_plan(plan: Any, json_out: bool) -> None:
    emit_json(plan.to_dict()) if json_out else console.print(str(plan))


def _apply_now(label: str, json_out: bool) -> dict[str, Any] | None:
    """Converge the fabrics on the new leases (None when no fabrics.yaml is configured)."""
    if not fabrics_path().exists():
        if not json_out:
            console.print(f"no {fabrics_path()}: recorded in the store only")
        return None
    with phase_progress(not json_out) as progress:
        t = open_engine(progress=progress).converge(label)
    if not json_out:
        console.print(f"applied and verified in {t.seconds:.2f}s ({t.changes} change(s))")
    return {
        "phase": t.phase,
        "seconds": round(t.seconds, 4),
        "changes": t.changes,
        "devices": {k: round(v, 4) for k, v in t.applied.items()},
    }
