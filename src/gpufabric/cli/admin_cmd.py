"""``gpufabric token create|list|revoke`` (API tokens, stored hashed) and ``gpufabric events``
(the append-only log of every write)."""

from __future__ import annotations

import typer

from gpufabric.cli.backend import backend, items
from gpufabric.cli.common import JSON_OPT, actions, open_store, reader
from gpufabric.cli.output import console, emit_json, table
from gpufabric.domain.auth import LOCAL_ADMIN, Role

token_app = typer.Typer(no_args_is_help=True)


@token_app.command("create")
def create_token(
    role: Role = typer.Option(..., "--role", help="admin, owner (leases out the nodes its tenant owns) or lessee."),
    tenant: str = typer.Option(None, "--tenant", help="The tenant of an owner or lessee token."),
    name: str = typer.Option("", "--name", help="A name for the token (default: role[-tenant])."),
    json_out: bool = JSON_OPT,
) -> None:
    """Create an API token. Its secret is printed once; only its sha256 is stored."""
    name = name or (role.value if tenant is None else f"{role.value}-{tenant}")
    r = backend()
    if r:
        out = r.post("/tokens", {"name": name, "role": role.value, "tenant": tenant})
    else:
        info, secret = actions().create_token(LOCAL_ADMIN, name, role.value, tenant)
        out = {**info.to_dict(), "secret": secret}
    if json_out:
        emit_json(out)
        return
    console.print(f"token {out['id']} ({out['role']}{', tenant ' + out['tenant'] if out['tenant'] else ''}):",
                  highlight=False)
    console.print(out["secret"], highlight=False, markup=False)
    console.print("[dim]shown once: store it now (e.g. export GPUFABRIC_TOKEN=...)[/]")


@token_app.command("list")
def list_tokens(json_out: bool = JSON_OPT) -> None:
    r = backend()
    if r:
        ts = items(r.get("/tokens"))
    else:
        from gpufabric.service.auth import Tokens

        ts = [t.to_dict() for t in Tokens(open_store()).list()]
    if json_out:
        emit_json(ts)
        return
    table(f"{len(ts)} tokens", ["id", "name", "role", "tenant", "created", "revoked"],
          [(t["id"], t["name"], t["role"], t["tenant"] or "-", t["created_at"][:19], (t["revoked_at"] or "-")[:19])
           for t in ts])


@token_app.command("revoke")
def revoke_token(token_id: int = typer.Argument(..., min=1, max=2**31 - 1), json_out: bool = JSON_OPT) -> None:
    """Revoke a token (kept in the list, never accepted again)."""
    r = backend()
    out = r.delete(f"/tokens/{token_id}") if r else actions().revoke_token(LOCAL_ADMIN, token_id).to_dict()
    emit_json(out) if json_out else console.print(f"token {out['id']} revoked", highlight=False)


def events(
    limit: int = typer.Option(50, "--limit", min=1, max=1000),
    action: str = typer.Option(None, "--action", help="Only this action, e.g. lease.create."),
    json_out: bool = JSON_OPT,
) -> None:
    """The event log: every write (CLI and API), who, what, when, outcome — newest first."""
    r = backend()
    evs = items(r.get("/events", limit=limit, action=action)) if r else reader().events(LOCAL_ADMIN, limit, 0, action)[0]
    if json_out:
        emit_json(evs)
        return
    table(f"{len(evs)} events", ["id", "at", "actor", "role", "tenant", "action", "target", "outcome", "message"],
          [(e["id"], (e["at"] or "")[:19], e["actor"], e["role"], e["tenant"] or "-", e["action"], e["target"],
            e["outcome"], e["message"][:80]) for e in evs])
