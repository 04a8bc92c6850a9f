"""``gpufabric token create|list|revoke`` (API tokens, stored hashed, optionally expiring) and
``gpufabric events`` (the append-only log of every write)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from gpufabric.cli.backends.choose import backend
from gpufabric.cli.common import JSON_OPT
from gpufabric.cli.decl import Argument, Group, Option
from gpufabric.cli.output import console, emit_json, table
from gpufabric.domain.auth import Role
from gpufabric.domain.errors import ValidationError

token_app = Group(no_args_is_help=True)
_DURATION = re.compile(r"^([0-9]{1,6})([smhdw])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
EXPIRES_ALLOWED = "a duration (30m, 12h, 90d, 2w) or an ISO 8601 time with a timezone (2027-01-01T00:00:00Z)"


def parse_expires(raw: str | None, now: datetime | None = None) -> datetime | None:
    """``--expires``: a duration from now or an absolute ISO time with a timezone (None: never)."""
    if not raw:
        return None
    now = now or datetime.now(UTC)
    m = _DURATION.match(raw.strip())
    if m:
        seconds = int(m.group(1)) * _UNIT[m.group(2)]
        if seconds <= 0:
            raise ValidationError("expires", raw, EXPIRES_ALLOWED, "not after now")
        return now + timedelta(seconds=seconds)
    try:
        t = datetime.fromisoformat(raw.strip().replace("Z", "+00:00") if raw.strip().endswith("Z") else raw.strip())
    except ValueError:
        raise ValidationError("expires", raw, EXPIRES_ALLOWED) from None
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValidationError("expires", raw, EXPIRES_ALLOWED, "no timezone")
    return t


@token_app.command("create")
def create_token(
    role: Role = Option(..., "--role", help="admin, owner (leases out the nodes its tenant owns) or lessee."),
    tenant: str = Option(None, "--tenant", help="The tenant of an owner or lessee token."),
    name: str = Option("", "--name", help="A name for the token (default: role[-tenant])."),
    expires: str = Option(None, "--expires", help=f"Refuse the token from then on: {EXPIRES_ALLOWED}."),
    json_out: bool = JSON_OPT,
) -> None:
    """Create an API token. Its secret is printed once; only its sha256 is stored."""
    name = name or (role.value if tenant is None else f"{role.value}-{tenant}")
    expires_at = parse_expires(expires)
    out = backend().create_token(name, role.value, tenant, expires_at)
    if json_out:
        emit_json(out)
        return
    until = f", expires {out['expires_at'][:19]}" if out.get("expires_at") else ""
    console.print(f"token {out['id']} ({out['role']}{', tenant ' + out['tenant'] if out['tenant'] else ''}{until}):",
                  highlight=False)
    console.print(out["secret"], highlight=False, markup=False)
    console.print("[dim]shown once: store it now in a file of mode 0600 and use GPUFABRIC_TOKEN_FILE=... "
                  "(--token shows in ps)[/]")


@token_app.command("list")
def list_tokens(json_out: bool = JSON_OPT) -> None:
    ts = backend().tokens()
    if json_out:
        emit_json(ts)
        return
    table(f"{len(ts)} tokens", ["id", "name", "role", "tenant", "created", "expires", "revoked"],
          [(t["id"], t["name"], t["role"], t["tenant"] or "-", t["created_at"][:19], (t.get("expires_at") or "-")[:19],
            (t["revoked_at"] or "-")[:19]) for t in ts])


@token_app.command("revoke")
def revoke_token(token_id: int = Argument(..., min=1, max=2**31 - 1), json_out: bool = JSON_OPT) -> None:
    """Revoke a token (kept in the list, never accepted again)."""
    out = backend().revoke_token(token_id)
    emit_json(out) if json_out else console.print(f"token {out['id']} revoked", highlight=False)


def events(
    limit: int = Option(50, "--limit", min=1, max=1000),
    action: str = Option(None, "--action", help="Only this action, e.g. lease.create."),
    json_out: bool = JSON_OPT,
) -> None:
    """The event log: every write (CLI and API), who, what, when, outcome — newest first."""
    evs = backend().events(limit, action)
    if json_out:
        emit_json(evs)
        return
    table(f"{len(evs)} events", ["id", "at", "actor", "role", "tenant", "action", "target", "outcome", "message"],
          [(e["id"], (e["at"] or "")[:19], e["actor"], e["role"], e["tenant"] or "-", e["action"], e["target"],
            e["outcome"], e["message"][:80]) for e in evs])
