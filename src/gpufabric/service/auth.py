"""API tokens and the append-only event log.

A token's secret is 32 random bytes (``gf_`` + urlsafe base64), shown once at creation;
the store keeps only its sha256. Authentication hashes the presented secret and looks it
up (revoked tokens never match). Every write — CLI or API, ok or failed — appends one
event: who (principal), what (action, target), when, the object's tenant, and the outcome.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from gpufabric.domain.auth import Principal, Role
from gpufabric.domain.errors import NotFoundError, UnauthorizedError, ValidationError
from gpufabric.domain.values import check_name
from gpufabric.service.db_models import EventRow, TenantRow, TokenRow
from gpufabric.service.store import Store

TOKEN_PREFIX = "gf_"
MAX_SECRET = 128


@dataclass(frozen=True)
class TokenInfo:
    id: int
    name: str
    role: Role
    tenant: str | None
    created_at: datetime
    created_by: str
    revoked_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "role": self.role.value,
            "tenant": self.tenant,
            "created_at": self.created_at.isoformat(),
            "created_by": self.created_by,
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
        }


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _info(r: TokenRow) -> TokenInfo:
    return TokenInfo(r.id, r.name, Role(r.role), r.tenant, r.created_at, r.created_by, r.revoked_at)


class Tokens:
    """Create, list, revoke and check API tokens in the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def create(self, name: str, role: Role | str, tenant: str | None, by: Principal) -> tuple[TokenInfo, str]:
        """A new token and its secret (the only time the secret is available)."""
        check_name("token.name", name)
        p = Principal(name, Role(role), tenant)  # validates role/tenant pairing
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self.store._tx() as s:
            if tenant is not None and s.scalar(select(TenantRow.id).where(TenantRow.name == tenant)) is None:
                raise NotFoundError("tenant", tenant)
            row = TokenRow(name=name, role=p.role.value, tenant=tenant, secret_sha256=_digest(secret), created_by=by.name)
            s.add(row)
            s.flush()
            return _info(row), secret

    def list(self) -> list[TokenInfo]:
        with self.store._tx() as s:
            return [_info(r) for r in s.scalars(select(TokenRow).order_by(TokenRow.id))]

    def revoke(self, token_id: int) -> TokenInfo:
        with self.store._tx() as s:
            row = s.get(TokenRow, token_id)
            if row is None:
                raise NotFoundError("token", str(token_id))
            if row.revoked_at is None:
                row.revoked_at = datetime.now(UTC)
            return _info(row)

    def authenticate(self, secret: str | None) -> Principal:
        """The principal of a bearer secret; UnauthorizedError if missing, unknown or revoked."""
        if not secret:
            raise UnauthorizedError("missing bearer token (Authorization: Bearer <token>)")
        if len(secret) > MAX_SECRET or not secret.startswith(TOKEN_PREFIX):
            raise UnauthorizedError("invalid or revoked token")
        with self.store._tx() as s:
            row = s.scalar(select(TokenRow).where(TokenRow.secret_sha256 == _digest(secret)))
            if row is None or row.revoked_at is not None:
                raise UnauthorizedError("invalid or revoked token")
            return Principal(row.name, Role(row.role), row.tenant)


@dataclass(frozen=True)
class Event:
    id: int
    at: datetime
    actor: str
    role: str
    tenant: str | None
    action: str
    target: str
    outcome: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at.isoformat(),
            "actor": self.actor,
            "role": self.role,
            "tenant": self.tenant,
            "action": self.action,
            "target": self.target,
            "outcome": self.outcome,
            "message": self.message,
        }


class EventLog:
    """Append-only: :meth:`record` adds a row; nothing updates or deletes one."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def record(
        self, who: Principal, action: str, target: str, ok: bool, message: str = "", tenant: str | None = None
    ) -> None:
        with self.store._tx() as s:
            s.add(self.row(who, action, target, ok, message, tenant))

    @staticmethod
    def row(
        who: Principal, action: str, target: str, ok: bool, message: str = "", tenant: str | None = None
    ) -> EventRow:
        """The event as a row, for a caller that writes it in its own transaction."""
        return EventRow(
            actor=who.name[:255],
            role=who.role.value,
            tenant=tenant if tenant is not None else who.tenant,
            action=action[:63],
            target=target[:255],
            outcome="ok" if ok else "error",
            message=message[:2000],
        )

    def list(self, tenant: str | None = None, limit: int = 100, offset: int = 0) -> list[Event]:
        if not 1 <= limit <= 1000:
            raise ValidationError("limit", limit, "1-1000")
        with self.store._tx() as s:
            q = select(EventRow).order_by(EventRow.id.desc()).limit(limit).offset(offset)
            if tenant is not None:
                q = q.where(EventRow.tenant == tenant)
            return [
                Event(r.id, r.at, r.actor, r.role, r.tenant, r.action, r.target, r.outcome, r.message)
                for r in s.scalars(q)
            ]
