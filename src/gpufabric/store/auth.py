"""API tokens and the append-only event log.

A token's secret is 32 random bytes (``gf_`` + urlsafe base64), shown once at creation;
the store keeps only its sha256. A token may expire (``expires_at``, 0006). Authentication
hashes the presented secret and looks it up (revoked and expired tokens never match). Every write — CLI or API, ok or failed — appends one
event: who (principal), what (action, target), when, the object's tenant, and the outcome.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from gpufabric.domain.auth import Principal, Role
from gpufabric.domain.errors import NotFoundError, UnauthorizedError, ValidationError
from gpufabric.domain.values import check_name
from gpufabric.store.core import Store
from gpufabric.store.tables import EventRow, TenantRow, TokenRow
from gpufabric.store.tx import Tx

TOKEN_PREFIX = "gf_"
MAX_SECRET = 128
MAX_LIFETIME = timedelta(days=3660)  # an expiry at most ~10 years ahead


@dataclass(frozen=True)
class TokenInfo:
    id: int
    name: str
    role: Role
    tenant: str | None
    created_at: datetime
    created_by: str
    revoked_at: datetime | None = None
    expires_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "role": self.role.value,
            "tenant": self.tenant,
            "created_at": self.created_at.isoformat(),
            "created_by": self.created_by,
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
        }


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _info(r: TokenRow) -> TokenInfo:
    return TokenInfo(r.id, r.name, Role(r.role), r.tenant, r.created_at, r.created_by, r.revoked_at, r.expires_at)


def check_expiry(expires_at: datetime | None, now: datetime | None = None) -> datetime | None:
    """``expires_at`` if it is an aware time in the future (at most ~10 years ahead), else ValidationError."""
    if expires_at is None:
        return None
    now = now or datetime.now(UTC)
    allowed = f"a time with a timezone after now and before {(now + MAX_LIFETIME).date().isoformat()}"
    if expires_at.tzinfo is None or not now < expires_at <= now + MAX_LIFETIME:
        raise ValidationError("expires", expires_at.isoformat(), allowed)
    return expires_at.astimezone(UTC)


class Tokens:
    """Create, list, revoke and check API tokens in the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def create(
        self, name: str, role: Role | str, tenant: str | None, by: Principal, expires_at: datetime | None = None
    ) -> tuple[TokenInfo, str]:
        """A new token and its secret (the only time the secret is available); it is refused
        from ``expires_at`` on (None: never expires)."""
        check_name("token.name", name)
        p = Principal(name, Role(role), tenant)  # validates role/tenant pairing
        expires_at = check_expiry(expires_at)
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self.store.tx() as tx:
            s = tx.session
            if tenant is not None and s.scalar(select(TenantRow.id).where(TenantRow.name == tenant)) is None:
                raise NotFoundError("tenant", tenant)
            row = TokenRow(name=name, role=p.role.value, tenant=tenant, secret_sha256=_digest(secret), created_by=by.name,
                           expires_at=expires_at)
            s.add(row)
            s.flush()
            return _info(row), secret

    def list(self) -> list[TokenInfo]:
        with self.store.tx() as tx:
            s = tx.session
            return [_info(r) for r in s.scalars(select(TokenRow).order_by(TokenRow.id))]

    def revoke(self, token_id: int) -> TokenInfo:
        with self.store.tx() as tx:
            s = tx.session
            row = s.get(TokenRow, token_id)
            if row is None:
                raise NotFoundError("token", str(token_id))
            if row.revoked_at is None:
                row.revoked_at = datetime.now(UTC)
            return _info(row)

    def authenticate(self, secret: str | None) -> Principal:
        """The principal of a bearer secret; UnauthorizedError if missing, unknown, revoked or expired."""
        return self.check(secret)[0]

    def check(self, secret: str | None) -> tuple[Principal, datetime | None]:
        """The principal of a bearer secret and when its token expires (None: never)."""
        if not secret:
            raise UnauthorizedError("missing bearer token (Authorization: Bearer <token>)")
        if len(secret) > MAX_SECRET or not secret.startswith(TOKEN_PREFIX):
            raise UnauthorizedError("invalid or revoked token")
        with self.store.tx() as tx:
            s = tx.session
            row = s.scalar(select(TokenRow).where(TokenRow.secret_sha256 == _digest(secret)))
            if row is None or row.revoked_at is not None:
                raise UnauthorizedError("invalid or revoked token")
            if row.expires_at is not None and row.expires_at <= datetime.now(UTC):
                raise UnauthorizedError(
                    f"token {row.id} ({row.name}) expired at {row.expires_at.isoformat(timespec='seconds')}:"
                    " create a new one (gpufabric token create --expires ...)",
                    field="token", value=row.id, allowed=f"before {row.expires_at.isoformat(timespec='seconds')}",
                )
            return Principal(row.name, Role(row.role), row.tenant), row.expires_at


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
        self, who: Principal, action: str, target: str, ok: bool, message: str = "", tenant: str | None = None,
        tx: Tx | None = None,
    ) -> None:
        """Append one event (``tx``: in the caller's transaction, committed with the write it records)."""
        with self.store.tx(tx) as tx:
            tx.session.add(self.row(who, action, target, ok, message, tenant))

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
        with self.store.tx() as tx:
            s = tx.session
            q = select(EventRow).order_by(EventRow.id.desc()).limit(limit).offset(offset)
            if tenant is not None:
                q = q.where(EventRow.tenant == tenant)
            return [
                Event(r.id, r.at, r.actor, r.role, r.tenant, r.action, r.target, r.outcome, r.message)
                for r in s.scalars(q)
            ]
