"""The lease write of the API's hot path in plain SQL (SQLAlchemy Core), with its event in the
same transaction: the same rules as :func:`gpufabric.service.store_leases.create` (tenant,
node, offering and the tenant's own networks exist; no overlap on the node, checked under the
node's row lock), without building ORM object graphs.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import insert, or_, select, update

from gpufabric.domain.auth import Principal
from gpufabric.domain.errors import ConflictError, NotFoundError, ValidationError
from gpufabric.domain.models import Lease
from gpufabric.service.db_models import (
    EventRow,
    LeaseNetworkRow,
    LeaseRow,
    NetworkRow,
    NodeRow,
    OfferingRow,
    TenantRow,
)
from gpufabric.service.store import Store

L = LeaseRow.__table__


def _aware(field: str, lease: Lease) -> None:
    for name, t in (("start", lease.start), ("end", lease.end)):
        if t is not None and (t.tzinfo is None or t.utcoffset() is None):
            raise ValidationError(f"{field}.{name}", t.isoformat(), "a timezone-aware datetime (e.g. ...+00:00)")


def create_lease(store: Store, lease: Lease, who: Principal) -> Lease:
    """Insert ``lease`` and its ``lease.create`` event in one transaction; the lease with its id."""
    if lease.id is not None:
        raise ValidationError("lease.id", lease.id, "unset (the store assigns lease ids)")
    _aware("lease", lease)
    with store._tx() as s:
        c = s.connection()
        ids = c.execute(
            select(
                select(TenantRow.id).where(TenantRow.name == lease.tenant).scalar_subquery(),
                select(OfferingRow.id).where(OfferingRow.name == lease.offering).scalar_subquery(),
            )
        ).one()
        tenant_id = ids[0]
        if tenant_id is None:
            raise NotFoundError("tenant", lease.tenant)
        node_id = c.execute(select(NodeRow.id).where(NodeRow.name == lease.node).with_for_update()).scalar()
        if node_id is None:
            raise NotFoundError("node", lease.node)
        if ids[1] is None:
            raise NotFoundError("offering", lease.offering)
        wanted = list(dict.fromkeys(lease.networks))
        found: dict[str, int] = {}
        if wanted:
            rows = c.execute(
                select(NetworkRow.name, NetworkRow.id).where(NetworkRow.tenant_id == tenant_id, NetworkRow.name.in_(wanted))
            )
            found = {r[0]: r[1] for r in rows}
        for name in wanted:
            if name not in found:
                raise NotFoundError("network", f"{lease.tenant}/{name}")
        net_ids = [found[n] for n in wanted]
        q = (
            select(L.c.id, L.c.start, L.c.end, TenantRow.name)
            .join(TenantRow.__table__, TenantRow.id == L.c.tenant_id)
            .where(L.c.node_id == node_id, or_(L.c.end.is_(None), L.c.end > lease.start))
        )
        if lease.end is not None:
            q = q.where(L.c.start < lease.end)
        other = c.execute(q.order_by(L.c.start).limit(1)).first()
        if other is not None:
            until = other.end.isoformat() if other.end else "open end"
            raise ConflictError(
                f"node {lease.node} already has lease {other.id} (tenant {other.name}, {other.start.isoformat()}"
                f" to {until}) overlapping the requested time",
                node=lease.node,
                lease=other.id,
            )
        result = c.execute(
            insert(LeaseRow).values(
                tenant_id=tenant_id,
                node_id=node_id,
                start=lease.start,
                end=lease.end,
                offering=lease.offering,
                owner=lease.owner,
                created_at=datetime.now(UTC),
                gpus=lease.gpus,
            )
        )
        lease_id = int(result.inserted_primary_key[0])  # type: ignore[index]
        if lease.active_at(datetime.now(UTC)):
            c.execute(update(NodeRow).where(NodeRow.id == node_id).values(state="leased"))
        if net_ids:
            c.execute(insert(LeaseNetworkRow), [{"lease_id": lease_id, "network_id": n} for n in net_ids])
        c.execute(
            insert(EventRow).values(
                at=datetime.now(UTC),
                actor=who.name,
                role=who.role.value,
                tenant=lease.tenant,
                action="lease.create",
                target=lease.node,
                outcome="ok",
                message="",
            )
        )
    return Lease(lease.tenant, lease.node, lease.start, lease.end, tuple(sorted(set(lease.networks))),
                 lease.offering, lease.owner, lease_id, lease.gpus)
