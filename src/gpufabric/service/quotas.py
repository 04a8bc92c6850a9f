"""Counting a tenant's use against its :class:`~gpufabric.domain.quotas.Quotas` before a write:
networks, live leases (pending grants included) and open moves into the tenant. An offer into
a tenant counts only once that tenant accepts it (else an owner could fill another tenant's
quota with offers). An admin is not counted; every other role (service included) is."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import func, or_, select

from gpufabric.domain.auth import Principal, Role
from gpufabric.domain.errors import QuotaError
from gpufabric.domain.moves import MovePhase, MoveStatus
from gpufabric.domain.quotas import Quotas
from gpufabric.service.db_models import LeaseRow, MoveRow, NetworkRow, TenantRow
from gpufabric.service.move_requests import OPEN
from gpufabric.service.store import Store

_COUNTED = tuple(x for x in OPEN if x != MoveStatus.OFFERED.value)


def used(store: Store, tenant: str, what: str) -> int:
    """How much of quota ``what`` tenant ``tenant`` holds now."""
    now = datetime.now(UTC)
    with store._tx() as s:
        if what == "networks":
            q = select(func.count()).select_from(NetworkRow).join(TenantRow).where(TenantRow.name == tenant)
            return int(s.scalar(q) or 0)
        if what == "open_moves":
            q = select(func.count()).select_from(MoveRow).where(MoveRow.to_tenant == tenant, MoveRow.status.in_(_COUNTED))
            return int(s.scalar(q) or 0)
        live = (
            select(func.count())
            .select_from(LeaseRow)
            .join(TenantRow)
            .where(TenantRow.name == tenant, or_(LeaseRow.end.is_(None), LeaseRow.end > now))
        )
        grants = select(func.count()).select_from(MoveRow).where(
            MoveRow.to_tenant == tenant,
            MoveRow.status.in_(_COUNTED),
            MoveRow.phase.in_((MovePhase.QUARANTINE.value, MovePhase.SWAP.value)),  # its lease is not written yet
        )
        return int(s.scalar(live) or 0) + int(s.scalar(grants) or 0)


def check(store: Store, quotas: Quotas, p: Principal, tenant: str, what: str, adding: int = 1) -> None:
    """QuotaError (429) naming the quota when ``adding`` more ``what`` would pass ``tenant``'s limit."""
    if p.role is Role.ADMIN:
        return
    limit = quotas.limit(what)
    have = used(store, tenant, what)
    if have + adding > limit:
        raise QuotaError(
            f"quota exceeded: tenant {tenant} holds {have} {what.replace('_', ' ')} of its quota {limit}"
            f" (quotas.{what} in config.yaml)",
            field=f"quotas.{what}", value=have + adding, allowed=f"at most {limit}", tenant=tenant,
        )  # fmt: skip
