"""``gpufabric lease create|list|delete``: leases of nodes to tenants (as in ESI: owner and lessee)."""

from __future__ import annotations

from datetime import UTC, datetime

import typer

from gpufabric.cli.common import JSON_OPT, open_store
from gpufabric.cli.output import console, emit_json, jsonable, table
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
    json_out: bool = JSON_OPT,
) -> None:
    """Lease a node to a tenant."""
    lease = Lease(
        tenant=tenant,
        node=node,
        start=parse_time("start", start) or datetime.now(UTC),
        end=parse_time("end", end),
        networks=tuple(network),
        offering=offering,
    )
    created = open_store().create_lease(lease)
    if json_out:
        emit_json(jsonable(created))
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
    """End a lease now."""
    gone = open_store().delete_lease(lease_id)
    if json_out:
        emit_json(jsonable(gone))
    else:
        console.print(f"lease {gone.id} deleted ({gone.node} leaves {gone.tenant})")
