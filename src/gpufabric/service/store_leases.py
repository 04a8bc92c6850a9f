"""Lease persistence for :class:`gpufabric.service.store.Store` (one session each).

Owns the lease rules the database must hold: one node has no two leases whose
[start, end) intervals overlap (an open end runs forever), and a lease's networks
belong to its tenant. Creation locks the node row (``SELECT ... FOR UPDATE`` on
PostgreSQL; SQLite transactions are ``BEGIN IMMEDIATE``) so that two replicas cannot
both pass the overlap check.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.orm import Session, selectinload

from gpufabric.domain.errors import ConflictError, NotFoundError, ValidationError
from gpufabric.domain.models import Lease, NodeState
from gpufabric.domain.values import check_id
from gpufabric.service.convert import lease_to_domain
from gpufabric.service.db_models import LeaseNetworkRow, LeaseRow, NetworkRow, NodeRow, OfferingRow, TenantRow

_LOAD = (
    selectinload(LeaseRow.tenant),
    selectinload(LeaseRow.node),
    selectinload(LeaseRow.networks).selectinload(LeaseNetworkRow.network),
)


def _aware(field: str, t: datetime) -> None:
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValidationError(field, t.isoformat(), "a timezone-aware datetime (e.g. ...+00:00)")


def create(s: Session, lease: Lease) -> Lease:
    if lease.id is not None:
        raise ValidationError("lease.id", lease.id, "unset (the store assigns lease ids)")
    _aware("lease.start", lease.start)
    if lease.end is not None:
        _aware("lease.end", lease.end)
    if lease.gpus is not None and not 1 <= lease.gpus <= 16:
        raise ValidationError("lease.gpus", lease.gpus, "1-16 GPUs, or unset for the whole node")
    tenant = s.scalar(select(TenantRow).where(TenantRow.name == lease.tenant))
    if tenant is None:
        raise NotFoundError("tenant", lease.tenant)
    node = s.scalar(select(NodeRow).where(NodeRow.name == lease.node).with_for_update())
    if node is None:
        raise NotFoundError("node", lease.node)
    if node.state == NodeState.MAINTENANCE.value:
        raise ConflictError(
            f"node {lease.node} is in maintenance (e.g. the subnet manager host) and cannot be leased", node=lease.node
        )
    if s.scalar(select(OfferingRow.id).where(OfferingRow.name == lease.offering)) is None:
        raise NotFoundError("offering", lease.offering)
    nets: list[NetworkRow] = []
    for name in dict.fromkeys(lease.networks):
        # names are unique per tenant: a lease's networks are always its own tenant's
        net = s.scalar(select(NetworkRow).where(NetworkRow.name == name, NetworkRow.tenant_id == tenant.id))
        if net is None:
            raise NotFoundError("network", f"{lease.tenant}/{name}")
        nets.append(net)
    q = select(LeaseRow).where(LeaseRow.node_id == node.id, or_(LeaseRow.end.is_(None), LeaseRow.end > lease.start))
    if lease.end is not None:
        q = q.where(LeaseRow.start < lease.end)
    other = s.scalars(q.options(*_LOAD).order_by(LeaseRow.start)).first()
    if other is not None:
        o = lease_to_domain(other)
        until = o.end.isoformat() if o.end else "open end"
        raise ConflictError(
            f"node {lease.node} already has lease {o.id} (tenant {o.tenant}, {o.start.isoformat()} to {until})"
            " overlapping the requested time",
            node=lease.node,
            lease=o.id,
        )
    row = LeaseRow(
        tenant=tenant,
        node=node,
        start=lease.start,
        end=lease.end,
        offering=lease.offering,
        owner=lease.owner,
        gpus=lease.gpus,
        networks=[LeaseNetworkRow(network=n) for n in nets],
    )
    s.add(row)
    s.flush()
    return lease_to_domain(row)


def get(s: Session, lease_id: int) -> Lease:
    return lease_to_domain(_row(s, lease_id))


def list_(s: Session, active_at: datetime | None) -> list[Lease]:
    """Leases (active at ``active_at`` if given) by start, in two plain SELECTs: the same
    values as ``lease_to_domain`` over the ORM rows, without loading ORM objects (a worker
    reads every active lease before each converge phase)."""
    q = (
        select(LeaseRow.id, TenantRow.name, NodeRow.name, LeaseRow.start, LeaseRow.end, LeaseRow.offering,
               LeaseRow.owner, LeaseRow.gpus)
        .join(TenantRow, LeaseRow.tenant_id == TenantRow.id)
        .join(NodeRow, LeaseRow.node_id == NodeRow.id)
        .order_by(LeaseRow.start, LeaseRow.id)
    )
    nq = select(LeaseNetworkRow.lease_id, NetworkRow.name).join(NetworkRow, LeaseNetworkRow.network_id == NetworkRow.id)
    if active_at is not None:
        _aware("active_at", active_at)
        active = (LeaseRow.start <= active_at, or_(LeaseRow.end.is_(None), LeaseRow.end > active_at))
        q = q.where(*active)
        nq = nq.join(LeaseRow, LeaseNetworkRow.lease_id == LeaseRow.id).where(*active)
    nets: dict[int, list[str]] = defaultdict(list)
    for lease_id, name in s.execute(nq):
        nets[lease_id].append(name)
    return [
        Lease(tenant=t, node=n, start=start, end=end, networks=tuple(sorted(nets[i])), offering=offering, owner=owner,
              id=i, gpus=gpus)
        for i, t, n, start, end, offering, owner, gpus in s.execute(q)
    ]


def delete(s: Session, lease_id: int) -> Lease:
    row = _row(s, lease_id)
    lease = lease_to_domain(row)
    s.delete(row)
    return lease


def _row(s: Session, lease_id: int) -> LeaseRow:
    check_id("lease_id", lease_id)  # an id no column can hold is refused, not an overflow
    row = s.scalar(select(LeaseRow).options(*_LOAD).where(LeaseRow.id == lease_id))
    if row is None:
        raise NotFoundError("lease", str(lease_id))
    return row
