"""A move request's checks, read for all the requested nodes at once: the node rows (locked),
their open moves, the target tenant and its networks, the offerings, each node's GPU count, the
leases active now; and the new move row. Everything the lease swap will need is checked here,
when the move is requested (a refusal records nothing), so that one bad request never reaches a
batch that it would fail. Used by :class:`gpufabric.store.moves.MoveLedger` (one
transaction per request)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session, selectinload

from gpufabric.domain import move_json
from gpufabric.domain.errors import ConflictError, NotFoundError, ValidationError
from gpufabric.domain.models import QUARANTINE, NodeState
from gpufabric.domain.moves import MovePhase, MoveRequest, MoveStatus
from gpufabric.domain.terms import check_terms
from gpufabric.store import slots
from gpufabric.store.registry import registered_terms
from gpufabric.store.tables import (
    LeaseRow,
    MoveRow,
    NetworkRow,
    NodeRow,
    OfferingRow,
    TenantRow,
    lease_active_at,
    lease_not_over_at,
)
from gpufabric.store.tx import Tx

OPEN = move_json.OPEN  # the statuses of an open move (one source: domain/move_json)
"""Statuses of a move that holds its node (one open move per node); an offer reserves it too."""
_SHOWN = 12  # names listed in a refusal's allowed values
_COUNTED = tuple(x for x in OPEN if x != MoveStatus.OFFERED.value)  # an offer counts once accepted


def listing(names: Sequence[str] | frozenset[str]) -> str:
    """``a, b, c`` (sorted), at most a dozen names then how many more: one readable line."""
    ordered = sorted(names)
    more = f" and {len(ordered) - _SHOWN} more" if len(ordered) > _SHOWN else ""
    return ", ".join(ordered[:_SHOWN]) + more


def hold_quota(tx: Tx, tenant: str) -> None:
    """Serialise the quota checks of ``tenant`` until ``tx`` ends, across processes and replicas:
    on PostgreSQL the tenant's row is locked (``FOR NO KEY UPDATE``: rows that merely refer to the
    tenant are still written), so another transaction's check of this tenant waits for this one
    to commit and then counts its rows (READ COMMITTED: each count is a new snapshot); SQLite's
    writers are serialised already (every transaction is ``BEGIN IMMEDIATE``: the database lock)."""
    s = tx.session
    if s.get_bind().dialect.name == "postgresql":
        s.execute(select(TenantRow.id).where(TenantRow.name == tenant).with_for_update(key_share=True))


def usage(tx: Tx, tenant: str, what: str) -> int:
    """How much of quota ``what`` (networks, leases, open_moves) tenant ``tenant`` holds now, read in
    the write's own transaction ``tx`` (:mod:`gpufabric.workflow.quotas` checks it against the limit):
    live leases count the grants whose lease is not written yet; an offer counts once accepted."""
    s = tx.session
    if what == "networks":
        q = select(func.count()).select_from(NetworkRow).join(TenantRow).where(TenantRow.name == tenant)
        return int(s.scalar(q) or 0)
    if what == "open_moves":
        q = select(func.count()).select_from(MoveRow).where(MoveRow.to_tenant == tenant, MoveRow.status.in_(_COUNTED))
        return int(s.scalar(q) or 0)
    now = datetime.now(UTC)
    live = (
        select(func.count())
        .select_from(LeaseRow)
        .join(TenantRow)
        .where(TenantRow.name == tenant, lease_not_over_at(now))
    )
    grants = select(func.count()).select_from(MoveRow).where(
        MoveRow.to_tenant == tenant,
        MoveRow.status.in_(_COUNTED),
        MoveRow.phase.in_((MovePhase.QUARANTINE.value, MovePhase.SWAP.value)),  # its lease is not written yet
    )
    return int(s.scalar(live) or 0) + int(s.scalar(grants) or 0)


def active_lease(s: Session, node_id: int, now: datetime) -> LeaseRow | None:
    q = select(LeaseRow).where(
        LeaseRow.node_id == node_id, lease_active_at(now)
    )
    return s.scalars(q).first()


@dataclass(frozen=True)
class RequestChecks:
    """What requests of moves of ``nodes`` check, read for all of them at once (node rows locked)."""

    nodes: dict[str, NodeRow]
    open_moves: dict[str, MoveRow]
    tenant_exists: bool
    active: dict[int, LeaseRow]  # node id -> its lease active now
    networks: frozenset[str] = frozenset()  # the target tenant's networks
    offerings: frozenset[str] = frozenset()

    @staticmethod
    def read(s: Session, nodes: Sequence[str], to_tenant: str, now: datetime) -> RequestChecks:
        rows = locked_nodes(s, nodes)
        moves = s.scalars(select(MoveRow).where(MoveRow.node.in_(nodes), MoveRow.status.in_(OPEN)).order_by(MoveRow.id))
        tenant = (
            to_tenant == QUARANTINE or s.scalar(select(TenantRow.id).where(TenantRow.name == to_tenant)) is not None
        )
        active = s.scalars(
            select(LeaseRow)
            .options(selectinload(LeaseRow.tenant))
            .where(
                LeaseRow.node_id.in_([r.id for r in rows.values()]),
                lease_active_at(now),
            )
            .order_by(LeaseRow.id.desc())
        )
        nets = s.scalars(
            select(NetworkRow.name).join(TenantRow, NetworkRow.tenant_id == TenantRow.id).where(TenantRow.name == to_tenant)
        )
        return RequestChecks(
            rows,
            {m.node: m for m in moves},
            tenant,
            {x.node_id: x for x in active},
            frozenset(nets) if to_tenant != QUARANTINE else frozenset(),
            frozenset(s.scalars(select(OfferingRow.name))),
        )

    def check_target(self, node: NodeRow, to_tenant: str, offering: str, networks: tuple[str, ...]) -> None:
        """What the lease swap needs of a move of ``node``, refused now with the field and what is
        allowed: the networks (the target tenant's own), the offering (what the fabric kinds need
        of the node for a lease term, e.g. its GPUs for a count of them, the workflow asks them:
        FabricKind.check_request)."""
        if offering not in self.offerings:
            raise ValidationError("offering", offering, listing(self.offerings) or "none (no offering is defined)")
        if to_tenant == QUARANTINE:
            if networks:
                raise ValidationError("networks", ",".join(networks)[:200], "none (quarantine joins no network)")
        else:
            unknown = [n for n in dict.fromkeys(networks) if n not in self.networks]
            if unknown:
                have = f"networks of tenant {to_tenant}: {listing(self.networks)}" if self.networks else (
                    f"none yet (tenant {to_tenant} has no networks: create one first)")  # fmt: skip
                raise ValidationError("networks", ",".join(unknown)[:200], have)


def new_move(
    s: Session,
    known: RequestChecks,
    now: datetime,
    node: str,
    req: MoveRequest,
) -> MoveRow:
    """The move row of ``req`` for ``node`` after every check (the first refusal raised; its
    ``networks`` already resolved); the node is marked moving, unless the move is only ``offered``
    (it waits for the receiving tenant's acceptance and changes nothing until then)."""
    to_tenant, offering, lease_end, not_before = req.to_tenant, req.offering, req.lease_end, req.not_before
    networks = req.networks or ()
    row = known.nodes.get(node)
    if row is None:
        raise NotFoundError("node", node)
    other = known.open_moves.get(node)
    if other is not None:
        raise ConflictError(
            f"node {node} already has open move {other.id} ({other.status} at {other.phase})",
            node=node,
            move=other.id,
        )
    if row.state == NodeState.MAINTENANCE.value and to_tenant != QUARANTINE:
        raise ConflictError(f"node {node} is in maintenance: not leasable", node=node)
    slots.check_request(s, row, to_tenant, now)  # a host's slots, a slot's host (issue 33)
    if not_before is not None and not_before.tzinfo is None:
        raise ValidationError("lease.start", not_before.isoformat(), "a timezone-aware time")
    if lease_end is not None and (lease_end.tzinfo is None or lease_end <= max(now, not_before or now)):
        raise ValidationError("lease.end", lease_end.isoformat(), "a timezone-aware time after the start")
    if req.terms:  # each in its kind's declared range (the kinds are loaded only for a request with terms)
        check_terms(req.terms, registered_terms())
    current = known.active.get(row.id)
    if req.grant and current is not None:
        raise ConflictError(
            f"node {node} is leased to {current.tenant.name} (lease {current.id}); end that lease first,"
            f" or hand it over with `gpufabric node move {node} --to-tenant {to_tenant}`",
            node=node,
            lease=current.id,
        )
    if not known.tenant_exists:  # after the node's own refusals: a leased node says so whatever tenant is named
        raise NotFoundError("tenant", to_tenant)
    known.check_target(row, to_tenant, offering, networks)
    from_tenant = current.tenant.name if current else QUARANTINE
    if req.release_ended and current is None:
        from_tenant = _ended_tenant(s, row, now)
    if (from_tenant == to_tenant or req.release_ended) and not (req.release_ended and row.state == NodeState.LEASED.value):
        raise ConflictError(f"node {node} is already in {to_tenant}", node=node)
    if current is None and row.state == NodeState.LEASED.value:  # its ended lease not released yet: the move
        from_tenant = _ended_tenant(s, row, now)  # leaves that tenant (drained first, store/view.py)
    mr = MoveRow(
        node=node,
        from_tenant=from_tenant,
        to_tenant=to_tenant,
        offering=offering,
        networks=",".join(networks),
        terms=dict(req.terms),
        lease_end=lease_end,
        not_before=not_before if not_before is not None and not_before > now else None,
        requested_by=req.requested_by[:255],
        phase=MovePhase.QUARANTINE.value,
        status=(MoveStatus.OFFERED if req.offered else MoveStatus.PENDING).value,
        attempts=0,
        error="",
    )
    s.add(mr)
    if not req.offered:
        row.state = NodeState.MOVING.value
    return mr


def _ended_tenant(s: Session, row: NodeRow, now: datetime) -> str:
    """The tenant of ``row``'s lease that ended last by ``now`` (QUARANTINE: none)."""
    q = select(LeaseRow).where(LeaseRow.node_id == row.id, LeaseRow.end <= now).order_by(LeaseRow.end.desc())
    last = s.scalars(q.limit(1)).first()
    return last.tenant.name if last is not None else QUARANTINE


def locked_nodes(s: Session, names: Sequence[str]) -> dict[str, NodeRow]:
    """The node rows ``names``, locked, by name."""
    return {n.name: n for n in s.scalars(select(NodeRow).where(NodeRow.name.in_(set(names))).with_for_update())}
