"""``gpufabric lease create|list|delete``: leases of nodes to tenants (as in ESI: owner and lessee)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import typer

from gpufabric.cli.common import JSON_OPT, fabrics_path, open_engine, open_store
from gpufabric.cli.output import console, emit_json, escape, jsonable, table
from gpufabric.cli.progress import phase_progress
from gpufabric.domain.errors import ValidationError
from gpufabric.domain.models import Lease
from gpufabric.domain.values import check_id

app = typer.Typer(no_args_is_help=True)


def parse_time(field: str, raw: str | None) -> datetime | None:
    if not raw:
        return None
    allowed = "ISO 8601 date-time with a timezone, e.g. 2026-12-01T09:00:00Z or 2026-12-01T10:00:00+01:00"
    try:
        t = datetime.fromisoformat(raw)
    except ValueError:
        raise ValidationError(field, raw, allowed) from None
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValidationError(field, raw, allowed, "no timezone")
    return t


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
    if dry_run:
        _print_plan(open_engine().preview(node, tenant, tuple(network))["join"], json_out)
        return
    created = open_store().create_lease(lease)
    applied = _apply_now("lease", json_out) if created.active_at(datetime.now(UTC)) else None
    if json_out:
        emit_json({**jsonable(created), "applied": applied})
    else:
        console.print(f"lease {created.id}: {created.node} -> {created.tenant} ({created.offering})")


@app.command("list")
def list_leases(json_out: bool = JSON_OPT) -> None:
    ls = open_store().leases()
    if json_out:
        emit_json(jsonable(ls))
        return
    table(
        f"{len(ls)} leases",
        ["id", "node", "tenant", "offering", "networks", "start", "end"],
        [
            (
                x.id,
                x.node,
                x.tenant,
                x.offering,
                ",".join(x.networks),
                x.start.isoformat(timespec="seconds"),
                x.end.isoformat(timespec="seconds") if x.end else "-",
            )
            for x in ls
        ],
    )


@app.command("delete")
def delete(lease_id: int, json_out: bool = JSON_OPT) -> None:
    """End a lease now: the node goes to quarantine on every fabric (verified)."""
    check_id("lease_id", lease_id)
    gone = open_store().delete_lease(lease_id)
    applied = _apply_now("release", json_out)
    if json_out:
        emit_json({**jsonable(gone), "applied": applied})
    else:
        console.print(f"lease {gone.id} deleted ({gone.node} leaves {gone.tenant})")


def _print_plan(plan: Any, json_out: bool) -> None:
    emit_json(plan.to_dict()) if json_out else console.print(escape(plan))


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
