"""Lease persistence for :class:`gpufabric.store.core.Store` (one session each).

Owns the lease rules the database must hold: one node has no two leases whose
[start, end) intervals overlap (an open end runs forever), and a lease's networks
belong to its tenant. Creation locks the node row (``SELECT ... FOR UPDATE`` on
PostgreSQL; SQLite transactions are ``BEGIN IMMEDIATE``) so that two replicas cannot
both pass the overlap check.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session, selectinload

from gpufabric.domain.errors import ConflictError, NotFoundError, ValidationError
from gpufabric.domain.models import QUARANTINE, Lease, NodeState, lease_not_over
from gpufabric.domain.moves import MovePhase
from gpufabric.domain.terms import check_terms, terms_of
from gpufabric.domain.values import check_id
from gpufabric.store.convert import lease_to_domain
from gpufabric.store.registry import registered_terms
from gpufabric.store.tables import (
    LeaseNetworkRow,
    LeaseRow,
    MoveRow,
    NetworkRow,
    NodeRow,
    OfferingRow,
    TenantRow,
    lease_active_at,
    lease_not_over_at,
)

_LOAD = (
    selectinload(LeaseRow.tenant),
    selectinload(LeaseRow.node),
    selectinload(LeaseRow.networks).selectinload(LeaseNetworkRow.network),
)


def _aware(field: str, t: datetime) -> None:
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValidationError(field, t.isoformat(), "a timezone-aware datetime (e.g. ...+00:00)")


def create(s: Session, lease: Lease) -> Lease:
    return create_many(s, [lease])[0]


def create_many(s: Session, leases: Sequence[Lease]) -> list[Lease]:
    """Insert ``leases`` after checking each (in order) as one lease would be: every referenced
    row is read for all of them at once (a batch of moves swaps its leases in one go)."""
    for lease in leases:
        _check(lease)
    if not leases:
        return []
    tenants = {r.name: r for r in s.scalars(select(TenantRow).where(TenantRow.name.in_({x.tenant for x in leases})))}
    nodes = {
        r.name: r
        for r in s.scalars(select(NodeRow).where(NodeRow.name.in_({x.node for x in leases})).with_for_update())
    }
    offerings = set(s.scalars(select(OfferingRow.name).where(OfferingRow.name.in_({x.offering for x in leases}))))
    nets = {
        (r.tenant_id, r.name): r
        for r in s.scalars(
            select(NetworkRow).where(
                NetworkRow.tenant_id.in_([t.id for t in tenants.values()]),
                NetworkRow.name.in_({n for x in leases for n in x.networks}),
            )
        )
    }
    earliest = min(x.start for x in leases)
    around: dict[int, list[LeaseRow]] = defaultdict(list)
    for o in s.scalars(
        select(LeaseRow)  # its tenant, node and networks are loaded only to name a conflict
        .where(LeaseRow.node_id.in_([n.id for n in nodes.values()]), lease_not_over_at(earliest))
        .order_by(LeaseRow.start)
    ):
        around[o.node_id].append(o)
    rows = []
    for lease in leases:
        tenant = tenants.get(lease.tenant)
        if tenant is None:
            raise NotFoundError("tenant", lease.tenant)
        node = nodes.get(lease.node)
        if node is None:
            raise NotFoundError("node", lease.node)
        if node.state == NodeState.MAINTENANCE.value:
            raise ConflictError(
                f"node {lease.node} is in maintenance (e.g. the subnet manager host) and cannot be leased",
                node=lease.node,
            )
        if lease.offering not in offerings:
            raise NotFoundError("offering", lease.offering)
        mine: list[NetworkRow] = []
        for name in dict.fromkeys(lease.networks):
            # names are unique per tenant: a lease's networks are always its own tenant's
            net = nets.get((tenant.id, name))
            if net is None:
                raise NotFoundError("network", f"{lease.tenant}/{name}")
            mine.append(net)
        _refuse_overlap(lease, around[node.id])
        row = LeaseRow(
            tenant=tenant,
            node=node,
            start=lease.start,
            end=lease.end,
            offering=lease.offering,
            owner=lease.owner,
            terms=dict(lease.terms),
            networks=[LeaseNetworkRow(network=n) for n in mine],
        )
        s.add(row)
        around[node.id].append(row)
        rows.append(row)
    s.flush()
    return [lease_to_domain(r) for r in rows]


def _check(lease: Lease) -> None:
    if lease.id is not None:
        raise ValidationError("lease.id", lease.id, "unset (the store assigns lease ids)")
    _aware("lease.start", lease.start)
    if lease.end is not None:
        _aware("lease.end", lease.end)
    if lease.terms:  # (the kinds are loaded only for a lease with terms)
        check_terms(lease.terms, registered_terms(), "lease.")


def _refuse_overlap(lease: Lease, others: Sequence[LeaseRow]) -> None:
    """ConflictError naming the first of ``others`` (the node's leases) that overlaps ``lease``."""
    for other in others:
        if (other.end is None or other.end > lease.start) and (lease.end is None or other.start < lease.end):
            o = lease_to_domain(other)
            until = o.end.isoformat() if o.end else "open end"
            raise ConflictError(
                f"node {lease.node} already has lease {o.id} (tenant {o.tenant}, {o.start.isoformat()} to {until})"
                " overlapping the requested time",
                node=lease.node,
                lease=o.id,
            )


def get(s: Session, lease_id: int) -> Lease:
    return lease_to_domain(_row(s, lease_id))


def list_(s: Session, active_at: datetime | None) -> list[Lease]:
    """Leases (active at ``active_at`` if given) by start, in two plain SELECTs: the same
    values as ``lease_to_domain`` over the ORM rows, without loading ORM objects (a worker
    reads every active lease before each converge phase)."""
    if active_at is None:
        return _select(s)
    _aware("active_at", active_at)
    return _select(s, lease_active_at(active_at))


def last_ended(s: Session, node_ids: Collection[int], now: datetime) -> list[Lease]:
    """Each of ``node_ids``' lease that ended last (by ``now``), if any; as :func:`list_` reads them."""
    if not node_ids:
        return []
    by_node = {x.node: x for x in sorted(_select(s, LeaseRow.node_id.in_(node_ids), LeaseRow.end <= now),
                                         key=lambda x: (x.end or now, x.id or 0))}  # fmt: skip
    return sorted(by_node.values(), key=lambda x: (x.start, x.id or 0))


def _select(s: Session, *where: ColumnElement[bool]) -> list[Lease]:
    q = (
        select(LeaseRow.id, TenantRow.name, NodeRow.name, LeaseRow.start, LeaseRow.end, LeaseRow.offering,
               LeaseRow.owner, LeaseRow.terms)
        .join(TenantRow, LeaseRow.tenant_id == TenantRow.id)
        .join(NodeRow, LeaseRow.node_id == NodeRow.id)
        .order_by(LeaseRow.start, LeaseRow.id)
    )
    nq = select(LeaseNetworkRow.lease_id, NetworkRow.name).join(NetworkRow, LeaseNetworkRow.network_id == NetworkRow.id)
    if where:
        q = q.where(*where)
        nq = nq.join(LeaseRow, LeaseNetworkRow.lease_id == LeaseRow.id).where(*where)
    nets: dict[int, list[str]] = defaultdict(list)
    for lease_id, name in s.execute(nq):
        nets[lease_id].append(name)
    return [
        Lease(tenant=t, node=n, start=start, end=end, networks=tuple(sorted(nets[i])), offering=offering, owner=owner,
              id=i, terms=terms_of(terms))
        for i, t, n, start, end, offering, owner, terms in s.execute(q)
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


def swap(s: Session, rows: Sequence[MoveRow], nodes: dict[str, NodeRow], now: datetime) -> None:
    """A move batch's lease swap (:meth:`~gpufabric.store.moves.MoveLedger.swap_leases`): end the current leases of ``rows``' nodes and start their new ones; phase -> join."""
    current = select(LeaseRow).where(
        LeaseRow.node_id.in_([nodes[r.node].id for r in rows if r.node in nodes]),
        lease_active_at(now),
    )
    for old in s.scalars(current):
        if old.start >= now:
            s.delete(old)
        else:
            old.end = now
    s.flush()
    new = [
        Lease(r.to_tenant, r.node, now, r.lease_end, tuple(n for n in r.networks.split(",") if n),
              r.offering or "baremetal", terms=terms_of(r.terms))
        for r in rows
        if r.to_tenant != QUARANTINE and lease_not_over(r.lease_end, now)
    ]  # fmt: skip
    create_many(s, new)
    for r in rows:
        if r.offering and r.node in nodes:
            nodes[r.node].offering = r.offering
        r.phase = MovePhase.JOIN.value
        r.claimed_at = r.heartbeat_at = now
    s.flush()

