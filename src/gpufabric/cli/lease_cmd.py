"""``gpufabric lease create|list|delete|offers|accept|decline``: leases of nodes to tenants (as in ESI: owner
and lessee); an owner's lease into another tenant is an offer that tenant accepts or declines.

``--gpus`` is the CLI's spelling of the NVLink kind's lease term ``gpus`` (``domain.terms``), one
of the core's declared exceptions to naming no fabric (as ``node move --gpus``): a command through
``--api`` loads no fabric package and starts within 8x ``python -c pass``, so the kinds cannot add
their options when it starts. ``tests/unit/test_lease_terms.py`` holds the options to the terms the
registered kinds declare."""

from __future__ import annotations

from datetime import datetime

from gpufabric.cli.backends.base import Terms
from gpufabric.cli.backends.choose import backend
from gpufabric.cli.common import JSON_OPT
from gpufabric.cli.decl import Group, Option
from gpufabric.cli.output import console, emit_json, escape, table
from gpufabric.domain.errors import ValidationError
from gpufabric.domain.lease_terms import terms_of

app = Group(no_args_is_help=True)


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
    tenant: str = Option(..., "--tenant"),
    node: str = Option(..., "--node"),
    network: list[str] = Option(
        [], "--network", help="Tenant network(s) the node joins (default: all the tenant's, when you act in that tenant)."
    ),
    no_networks: bool = Option(False, "--no-networks", help="Join no network: ports stay shut until one attaches."),
    offering: str = Option("baremetal", "--offering"),
    gpus: int = Option(None, "--gpus", help="GPUs of the node leased (an NVLink partition; default all); on a vm-host: the slot's."),
    slot: bool = Option(False, "--slot", help="Lease a slot of a shared host (vm-host) of --gpus GPUs: refused on any other node."),
    start: str = Option(None, "--start", help="ISO time (default now); a later start schedules the lease."),
    end: str = Option(None, "--end", help="ISO time; when it passes the worker releases the node to quarantine."),
    dry_run: bool = Option(False, "--dry-run", help="Print the plan; change nothing."),
    json_out: bool = JSON_OPT,
) -> None:
    """Lease an available node to a tenant: a move from quarantine, applied and verified on every
    fabric (here, or by the server's worker with --api; its phases are shown as they happen)."""
    from gpufabric.cli.move_run import print_plans

    t0, t1 = parse_time("start", start), parse_time("end", end)
    if no_networks and network:
        raise ValidationError("--no-networks", " ".join(network), "either --network or --no-networks, not both")
    chosen: tuple[str, ...] | None = tuple(network) if network else (() if no_networks else None)
    b = backend()
    terms = Terms(tenant, chosen, offering, terms_of({"gpus": gpus}), t0, t1, slot)
    if dry_run:  # the join phase: what the lease's move would give the node
        print_plans(b.preview(node, terms), json_out, phase="join")
        return
    b.run(b.create_lease(node, terms), json_out)


@app.command("list")
def list_leases(json_out: bool = JSON_OPT) -> None:
    ls = backend().leases()
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
    from gpufabric.domain.move_json import run_json
    from gpufabric.domain.values import check_id

    check_id("lease_id", lease_id)
    b = backend()
    lease, moves = b.end_lease(lease_id)
    if moves:
        b.run(moves, json_out)
    elif json_out:  # the lease as DELETE /leases/{id} answers it
        emit_json({"lease": lease, **run_json([])})
    else:
        console.print(f"lease {lease['id']} ({escape(lease['node'])}, {escape(lease['tenant'])}) needs no release")


@app.command("offers")
def offers(json_out: bool = JSON_OPT) -> None:
    """Leases offered into your tenant by a node's owner (or made by you as an owner), waiting for an answer."""
    ms = backend().offers()
    if json_out:
        emit_json(ms)
        return
    table(f"{len(ms)} offers", ["id", "node", "tenant", "offering", "networks"],
          [(m["id"], m["node"], m["to_tenant"], m["offering"], ",".join(m["networks"])) for m in ms])  # fmt: skip


def _decide(move_id: int, accept: bool, json_out: bool) -> None:
    from gpufabric.domain.values import check_id

    check_id("offer_id", move_id)
    m = backend().decide_offer(move_id, accept)
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
