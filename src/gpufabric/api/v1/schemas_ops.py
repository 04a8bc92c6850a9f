"""API models of the operations endpoints: events, tokens, audit, reconcile, health
(``/api/v1/events``, ``/tokens``, ``/audit``, ``/reconcile``, ``/readyz``; a fabric kind's own
routes keep their models in the kind's package)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, Field

from gpufabric.api.v1.schemas import Name, Strict


# ---------------------------------------------------------------- ops
class EventOut(BaseModel):
    id: int
    at: str | None
    actor: str
    role: str
    tenant: str | None
    action: str
    target: str
    outcome: str
    message: str


class EventPage(BaseModel):
    items: list[EventOut]
    total: int
    limit: int
    offset: int


class TokenIn(Strict):
    name: Name
    role: Literal["admin", "owner", "lessee", "service"]
    tenant: Name | None = None
    expires_at: AwareDatetime | None = Field(
        None, description="Refused from this time on (with a timezone, within ~10 years); omitted: never expires"
    )


class TokenOut(BaseModel):
    id: int
    name: str
    role: str
    tenant: str | None
    created_at: str
    created_by: str
    revoked_at: str | None
    expires_at: str | None = None


class TokenCreated(TokenOut):
    secret: str = Field(description="Shown once; only its sha256 is stored")


class TokenList(BaseModel):
    items: list[TokenOut]


class AuditOut(BaseModel):
    at: datetime | None = None
    report: dict[str, Any]


class ReconcileOut(BaseModel):
    loops: list[dict[str, Any]]
    last: dict[str, Any] | None


class Health(BaseModel):
    status: str
    checks: dict[str, Any] = Field(default_factory=dict)
