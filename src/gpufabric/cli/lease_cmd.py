"""``gpufabric lease create|list|delete|offers|accept|decline``: leases of nodes to tenants (as in ESI: owner
and lessee); an owner's lease into another tenant is an offer that tenant accepts or declines."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import typer

from gpufabric.cli.backend import ALL, backend, items
from gpufabric.cli.common import JSON_OPT, actions, open_engine, open_store, reader
from gpufabric.cli.output import console, emit_json, escape, table
from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.errors import ValidationError

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
    network: list[str] = typer.Option(
        [], "--network", help="Tenant network(s) the node joins (default: all the tenant's, when you act in that tenant)."
    ),
    no_networks: bool = typer.Option(False, "--no-networks", help="Join no network: ports stay shut until one attaches."),
    offering: str = typer.Option("baremetal", "--offering"),
    gpus: int = typer.Option(None, "--gpus", help="GPUs of the node leased (an NVLink partition; default all)."),
    start: str = typer.Option(None, "--start", help="ISO time (default now); a later start schedules the lease."),
    end: str = typer.Option(None, "--end", help="ISO time; when it passes the worker releases the node to quarantine."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; change nothing."),
    json_out: bool = JSON_OPT,
) -> None:
    """Lease an available node to a tenant: a move from quarantine, applied and verified on every
    fabric (here, or by the server's worker with --api; its phases are shown as they happen)."""
    from gpufabric.cli.move_cmd import follow_remote, run_requested

    t0, t1 = parse_time("start", start), parse_time("end", end)
    if no_networks and network:
        raise ValidationError("--no-networks", " ".join(network), "either --network or --no-networks, not both")
    chosen: tuple[str, ...] | None = tuple(network) if network else (() if no_networks else None)
    r = backend()
    if r:
        if dry_run:
            body: dict[str, Any] = {"node": node, "to_tenant": tenant, "offering": offering,
                                    "networks": None if chosen is None else list(chosen)}  # fmt: skip
            plans = r.post("/moves/preview", {**body, **({"gpus": gpus} if gpus else {})})["phases"]
            emit_json(plans["join"]) if json_out else console.print(escape(plans["join"]))
            return
        body = {"tenant": tenant, "node": node, "networks": None if chosen is None else list(chosen),
                "offering": offering, "gpus": gpus,
                "start": t0.isoformat() if t0 else None, "end": t1.isoformat() if t1 else None}  # fmt: skip
        move = r.post("/leases", body)
        follow_remote(r, move["id"], json_out)
        return
    store = open_store()
    store.node(node)
    if dry_run:
        nets = chosen if chosen is not None else tuple(n.name for n in store.networks(tenant))
        _print_plan(open_engine().preview(node, tenant, nets, gpus=gpus, offering=offering)["join"], json_out)
        return
    engine = open_engine()
    move = actions().create_lease(LOCAL_ADMIN, tenant, node, chosen, offering, t0, t1, gpus)
    run_requested(engine, [move.id] if move.id is not None else [], json_out)


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
def delete(lease_id: int, json_out: bool = JSON_OPT) -> None:
    """End a lease now: its node goes to quarantine on every fabric (verified); the lease is kept, ended."""
    from gpufabric.cli.move_cmd import follow_remote, run_requested
    from gpufabric.domain.move_json import lease_out, run_json
    from gpufabric.domain.values import check_id

    check_id("lease_id", lease_id)
    r = backend()
    if r:
        ended = r.delete(f"/leases/{lease_id}")
        if ended.get("move"):
            follow_remote(r, ended["move"]["id"], json_out)
        else:
            emit_json({"lease": ended["lease"], **run_json([])}) if json_out else console.print(
                f"lease {lease_id} needs no release")  # fmt: skip
        return
    lease, move = actions().end_lease(LOCAL_ADMIN, lease_id)
    if move is None:
        if json_out:  # the lease as DELETE /leases/{id} answers it
            emit_json({"lease": lease_out(lease, datetime.now(UTC)), **run_json([])})
        else:
            console.print(f"lease {lease.id} ({escape(lease.node)}, {escape(lease.tenant)}) needs no release")
        return
    run_requested(open_engine(), [move.id] if move.id is not None else [], json_out)


def _print_plan(plan: Any, json_out: bool) -> None:
    emit_json(plan.to_dict()) if json_out else console.print(escape(str(plan)))


@app.command("offers")
def offers(json_out: bool = JSON_OPT) -> None:
    """Leases offered into your tenant by a node's owner (or made by you as an owner), waiting for an answer."""
    r = backend()
    ms = items(r.get("/offers", limit=1000)) if r else reader().moves(LOCAL_ADMIN, ALL, 0, state="offered")[0]
    if json_out:
        emit_json(ms)
        return
    table(f"{len(ms)} offers", ["id", "node", "tenant", "offering", "networks"],
          [(m["id"], m["node"], m["to_tenant"], m["offering"], ",".join(m["networks"])) for m in ms])  # fmt: skip


def _decide(move_id: int, accept: bool, json_out: bool) -> None:
    from gpufabric.domain.values import check_id

    check_id("offer_id", move_id)
    r = backend()
    if r:
        m = r.post(f"/offers/{move_id}/{'accept' if accept else 'decline'}", {})
    else:
        from gpufabric.domain.move_json import move_out

        m = move_out(actions().decide_offer(LOCAL_ADMIN, move_id, accept))  # as the API answers it
    if json_out:
        emit_json(m)
    else:
        console.print(f"offer {move_id} ({m['node']} -> {m['to_tenant']}): {m['status']}")


@app.command("accept")
def accept(offer_id: int, json_out: bool = JSON_OPT) -> None:
    """Accept a lease offered into your tenant: its grant runs (`gpufabric move show ID` follows it)."""
    _decide(offer_id, True, json_out)


@app.command("decline")
def decline(offer_id: int, json_out: bool = JSON_OPT) -> None:
    """Decline a lease offered into your tenant (an owner withdraws its own offer the same way)."""
    _decide(offer_id, False, json_out)
