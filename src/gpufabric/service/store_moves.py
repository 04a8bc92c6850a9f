"""Durable move intents: request, claim (SKIP LOCKED), phase updates, the lease swap.

One open move per node (checked under the node's row lock). Workers claim pending moves,
and running moves whose claim went stale (the worker died), with
``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL, so several replicas never run the
same move; SQLite serialises writers (``BEGIN IMMEDIATE``). The lease swap — end the old
lease, start the new one, advance the phase — is one transaction.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from gpufabric.domain.errors import ConflictError, NotFoundError, ValidationError
from gpufabric.domain.models import QUARANTINE, Lease, NodeState
from gpufabric.domain.moves import Move, MovePhase, MoveStatus
from gpufabric.service import store_leases
from gpufabric.service.db_models import LeaseRow, MoveRow, NodeRow, TenantRow
from gpufabric.service.store import Store

FABRIC_LOCK_KEY: Final = 0x6770_6662  # pg_advisory_lock key of the fabric-apply lock
OPEN = (MoveStatus.PENDING.value, MoveStatus.RUNNING.value, MoveStatus.FAILED.value)


def _to_domain(r: MoveRow) -> Move:
    return Move(
        node=r.node,
        to_tenant=r.to_tenant,
        from_tenant=r.from_tenant,
        offering=r.offering,
        networks=tuple(n for n in r.networks.split(",") if n),
        phase=MovePhase(r.phase),
        status=MoveStatus(r.status),
        attempts=r.attempts,
        error=r.error,
        claimed_by=r.claimed_by,
        id=r.id,
    )


def _active_lease(s: Session, node_id: int, now: datetime) -> LeaseRow | None:
    q = select(LeaseRow).where(
        LeaseRow.node_id == node_id, LeaseRow.start <= now, or_(LeaseRow.end.is_(None), LeaseRow.end > now)
    )
    return s.scalars(q).first()


class MoveLedger:
    """The store's move intents. Wraps a :class:`Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def request(self, node: str, to_tenant: str, offering: str = "baremetal", networks: tuple[str, ...] = ()) -> Move:
        """Record a move of ``node`` to ``to_tenant`` (QUARANTINE releases it). Validates
        everything first; ConflictError if the node already has an open move."""
        now = datetime.now(UTC)
        with self.store._tx() as s:
            row = s.scalar(select(NodeRow).where(NodeRow.name == node).with_for_update())
            if row is None:
                raise NotFoundError("node", node)
            other = s.scalar(select(MoveRow).where(MoveRow.node == node, MoveRow.status.in_(OPEN)))
            if other is not None:
                raise ConflictError(
                    f"node {node} already has open move {other.id} ({other.status} at {other.phase})",
                    node=node,
                    move=other.id,
                )
            if to_tenant != QUARANTINE:
                if s.scalar(select(TenantRow.id).where(TenantRow.name == to_tenant)) is None:
                    raise NotFoundError("tenant", to_tenant)
                if not networks:
                    raise ValidationError("networks", "", f"at least one network of tenant {to_tenant}")
            current = _active_lease(s, row.id, now)
            from_tenant = current.tenant.name if current else QUARANTINE
            if from_tenant == to_tenant:
                raise ConflictError(f"node {node} is already in {to_tenant}", node=node)
            mr = MoveRow(
                node=node,
                from_tenant=from_tenant,
                to_tenant=to_tenant,
                offering=offering,
                networks=",".join(networks),
                phase=MovePhase.QUARANTINE.value,
                status=MoveStatus.PENDING.value,
                attempts=0,
                error="",
            )
            s.add(mr)
            row.state = NodeState.MOVING.value
            s.flush()
            return _to_domain(mr)

    @contextmanager
    def fabric_lock(self) -> Iterator[None]:
        """Serialise desired-state computation + apply + verify across workers (replicas):
        an advisory lock on PostgreSQL, a file lock beside an SQLite database. A crashed
        holder releases it (its session or file descriptor dies with it)."""
        engine = self.store._engine
        if engine.dialect.name == "postgresql":
            with engine.connect() as conn:
                conn.exec_driver_sql(f"SELECT pg_advisory_lock({FABRIC_LOCK_KEY})")
                conn.commit()
                try:
                    yield
                finally:
                    conn.exec_driver_sql(f"SELECT pg_advisory_unlock({FABRIC_LOCK_KEY})")
                    conn.commit()
            return
        database = engine.url.database
        if not database or database == ":memory:":
            yield
            return
        with Path(database + ".fabric-lock").open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def get(self, move_id: int) -> Move:
        with self.store._tx() as s:
            r = s.get(MoveRow, move_id)
            if r is None:
                raise NotFoundError("move", str(move_id))
            return _to_domain(r)

    def moves(self, open_only: bool = False) -> list[Move]:
        with self.store._tx() as s:
            q = select(MoveRow).order_by(MoveRow.id)
            if open_only:
                q = q.where(MoveRow.status.in_(OPEN))
            return [_to_domain(r) for r in s.scalars(q)]

    def open_moves(self) -> list[Move]:
        return self.moves(open_only=True)

    def claim(self, worker: str, limit: int = 64, stale_after: float = 120.0) -> list[Move]:
        """Claim pending moves and running ones whose claim is older than ``stale_after`` s."""
        now = datetime.now(UTC)
        with self.store._tx() as s:
            q = (
                select(MoveRow)
                .where(
                    or_(
                        MoveRow.status == MoveStatus.PENDING.value,
                        (MoveRow.status == MoveStatus.RUNNING.value)
                        & (MoveRow.claimed_at < now - timedelta(seconds=stale_after)),
                    )
                )
                .order_by(MoveRow.id)
                .limit(limit)
                .with_for_update(skip_locked=True)
            )
            rows = list(s.scalars(q))
            for r in rows:
                r.status, r.claimed_by, r.claimed_at, r.attempts = MoveStatus.RUNNING.value, worker, now, r.attempts + 1
            s.flush()
            return [_to_domain(r) for r in rows]

    def set_phase(self, move: Move, phase: MovePhase) -> Move:
        with self.store._tx() as s:
            r = self._row(s, move)
            r.phase = phase.value
            r.claimed_at = datetime.now(UTC)
            if phase is MovePhase.DONE:
                r.status = MoveStatus.DONE.value
                node = s.scalar(select(NodeRow).where(NodeRow.name == r.node))
                if node is not None:
                    node.state = (NodeState.AVAILABLE if r.to_tenant == QUARANTINE else NodeState.LEASED).value
            return _to_domain(r)

    def swap_lease(self, move: Move) -> Move:
        """End the node's current lease and start the new one; phase -> join. One transaction."""
        now = datetime.now(UTC)
        with self.store._tx() as s:
            r = self._row(s, move)
            node = s.scalar(select(NodeRow).where(NodeRow.name == r.node).with_for_update())
            assert node is not None
            old = _active_lease(s, node.id, now)
            if old is not None:
                if old.start >= now:
                    s.delete(old)
                else:
                    old.end = now
                s.flush()
            if r.to_tenant != QUARANTINE:
                networks = tuple(n for n in r.networks.split(",") if n)
                store_leases.create(s, Lease(r.to_tenant, r.node, now, None, networks, r.offering or "baremetal"))
            if r.offering:
                node.offering = r.offering
            r.phase = MovePhase.JOIN.value
            r.claimed_at = now
            return _to_domain(r)

    def fail(self, move: Move, error: str) -> Move:
        with self.store._tx() as s:
            r = self._row(s, move)
            r.status, r.error = MoveStatus.FAILED.value, error[:2000]
            return _to_domain(r)

    def retry(self, move_id: int) -> Move:
        """Put a failed move back in the queue; it resumes at its recorded phase."""
        with self.store._tx() as s:
            r = s.get(MoveRow, move_id, with_for_update=True)
            if r is None:
                raise NotFoundError("move", str(move_id))
            if r.status != MoveStatus.FAILED.value:
                raise ConflictError(f"move {move_id} is {r.status}, not failed", move=move_id)
            r.status, r.error, r.claimed_by = MoveStatus.PENDING.value, "", None
            return _to_domain(r)

    @staticmethod
    def _row(s: Session, move: Move) -> MoveRow:
        assert move.id is not None
        r = s.get(MoveRow, move.id, with_for_update=True)
        if r is None:
            raise NotFoundError("move", str(move.id))
        return r
