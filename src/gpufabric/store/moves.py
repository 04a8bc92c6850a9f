"""Durable move intents: request, claim (SKIP LOCKED), phase updates, the lease swap.

One open move per node (checked under the node's row lock). Workers claim pending moves,
and running moves whose claim went stale (the worker died), with
``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL, so several replicas never run the
same move; SQLite serialises writers (``BEGIN IMMEDIATE``). The lease swap — end the old
lease, start the new one, advance the phase — is one transaction.

Fencing: a worker heartbeats while it holds moves; a claim is stale when its heartbeat is older
than the longest a phase can take, or at once when its worker ran on this host and its process
is gone. Every update is conditional on the claim it holds (:class:`ClaimLostError` otherwise).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Final

from sqlalchemy import func, or_, select, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from gpufabric.domain.errors import ConflictError, GpufabricError, NotFoundError, ValidationError
from gpufabric.domain.models import QUARANTINE, NodeState
from gpufabric.domain.moves import Move, MovePhase, MoveRequest, MoveStatus
from gpufabric.domain.terms import terms_of
from gpufabric.store.core import Store
from gpufabric.store.leases import swap
from gpufabric.store.liveness import HeartbeatWatch, stalled_rows
from gpufabric.store.lock import FabricLock, lock_holders
from gpufabric.store.move_requests import OPEN, RequestChecks, locked_nodes, new_move
from gpufabric.store.tables import LeaseRow, MoveEventRow, MoveRow, NodeRow, lease_active_at
from gpufabric.store.tx import Tx

PREPARED: Final = "prepared"
"""The move event of a move whose ``before_move`` passed (:meth:`MoveLedger.mark_prepared`)."""


def prepared_ids(s: Session, ids: Collection[int]) -> set[int]:
    """The moves of ``ids`` whose fabrics prepared their node (a :data:`PREPARED` event)."""
    if not ids:
        return set()
    q = select(MoveEventRow.move_id).where(MoveEventRow.move_id.in_(ids), MoveEventRow.phase == PREPARED)
    return set(s.scalars(q.distinct()))


def move_to_domain(r: MoveRow) -> Move:
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
        terms=terms_of(r.terms),
        lease_end=r.lease_end,
        not_before=r.not_before,
        requested_by=r.requested_by or "",
    )


class ClaimLostError(GpufabricError):
    """Another worker holds this move now (ours went stale): stop touching it."""


def _claimed(s: Session, rows: Sequence[MoveRow], worker: str, now: datetime) -> list[Move]:
    """``rows`` claimed by ``worker`` at ``now`` (one more attempt, a fresh heartbeat, no
    fabric-lock session yet: :meth:`MoveLedger.locked` records it)."""
    for r in rows:
        r.status, r.claimed_by, r.claimed_at, r.attempts = MoveStatus.RUNNING.value, worker, now, r.attempts + 1
        r.heartbeat_at, r.lock_session = now, None
    s.flush()
    return [move_to_domain(r) for r in rows]


def worker_dead(worker: str | None, host: str | None = None) -> bool:
    """True when ``worker`` ("host:pid" or "host:pid:role") ran on this host and its process is gone."""
    if not worker or ":" not in worker:
        return False
    h, pid = worker.split(":")[:2]
    if h != (host or os.uname().nodename) or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class MoveLedger:
    """The store's move intents. Wraps a :class:`Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.lock = FabricLock(store)

    def request(self, node: str, req: MoveRequest, *, tx: Tx | None = None) -> Move:
        """Record a move of ``node`` as ``req`` asks (see :class:`MoveRequest`). Validates
        everything first; ConflictError if the node already has an open move.
        ``tx``: the caller's transaction, to compose the request with its own writes (its event)."""
        return self.request_many([node], req, tx=tx)[0]

    def request_many(self, nodes: Sequence[str], req: MoveRequest, *, tx: Tx | None = None) -> list[Move]:
        """:meth:`request` for each of ``nodes`` in one transaction: all are recorded, or none
        (the first refusal is raised). Requested together, they are claimed as one batch."""
        if not nodes or len(set(nodes)) != len(nodes):
            raise ValidationError("nodes", ",".join(nodes)[:200], "one or more node names, each once")
        now = datetime.now(UTC)
        with self.store.tx(tx) as tx:
            s = tx.session
            known = RequestChecks.read(s, nodes, req.to_tenant, now)
            if req.networks is None:
                req = replace(req, networks=tuple(sorted(known.networks)))
            out = [new_move(s, known, now, node, req) for node in nodes]
            s.flush()
            return [move_to_domain(r) for r in out]

    def get(self, move_id: int, tx: Tx | None = None) -> Move:
        with self.store.tx(tx) as tx:
            s = tx.session
            r = s.get(MoveRow, move_id)
            if r is None:
                raise NotFoundError("move", str(move_id))
            return move_to_domain(r)

    def moves(self, open_only: bool = False) -> list[Move]:
        with self.store.tx() as tx:
            s = tx.session
            q = select(MoveRow).order_by(MoveRow.id)
            if open_only:
                q = q.where(MoveRow.status.in_(OPEN))
            return [move_to_domain(r) for r in s.scalars(q)]

    def open_moves(self) -> list[Move]:
        return self.moves(open_only=True)

    def claim(
        self,
        worker: str,
        limit: int = 64,
        stale_after: float = 120.0,
        watch: HeartbeatWatch | None = None,
        stalled_after: float | None = None,
        gone_after: float | None = None,
    ) -> list[Move]:
        """Claim pending moves, and running ones whose worker is gone: its heartbeat is older
        than ``stale_after`` s, or it ran on this host and its process no longer exists, or
        (with ``watch``) its heartbeat has not changed for ``stalled_after`` s of this process's
        clock, whatever host it ran on — ``gone_after`` s when the fabric-lock session it ran
        under ended (PostgreSQL: store/liveness.py)."""
        now = datetime.now(UTC)
        due = or_(MoveRow.not_before.is_(None), MoveRow.not_before <= now)
        beat = func.coalesce(MoveRow.heartbeat_at, MoveRow.claimed_at)
        stale = (MoveRow.status == MoveStatus.RUNNING.value) & (beat < now - timedelta(seconds=stale_after))
        with self.store.tx(durable=False) as tx:  # made durable by the quarantine phase's commit, before any fabric change
            s = tx.session
            q = (
                select(MoveRow)
                .where(or_((MoveRow.status == MoveStatus.PENDING.value) & due, stale))
                .order_by(MoveRow.id)
                .limit(limit)
                .with_for_update(skip_locked=True)
            )
            rows = list(s.scalars(q))
            if len(rows) < limit:  # running moves of a worker of this host whose process is gone
                here = select(MoveRow).where(
                    MoveRow.status == MoveStatus.RUNNING.value, MoveRow.claimed_by.like(f"{os.uname().nodename}:%")
                )
                taken = {r.id for r in rows}
                for r in s.scalars(here.order_by(MoveRow.id).with_for_update(skip_locked=True)):
                    if len(rows) < limit and r.id not in taken and worker_dead(r.claimed_by):
                        rows.append(r)
            if watch is not None and stalled_after is not None and len(rows) < limit:
                holders = (lambda: lock_holders(s)) if s.get_bind().dialect.name == "postgresql" else None
                taken = {r.id for r in rows}
                rows += stalled_rows(s, watch, stalled_after, worker, taken, limit - len(rows), gone_after, holders)
            return _claimed(s, rows, worker, now)

    def claim_ids(self, worker: str, ids: Sequence[int]) -> list[Move]:
        """Claim the pending moves ``ids`` (those another worker did not take first), in order."""
        if not ids:
            return []
        now = datetime.now(UTC)
        with self.store.tx() as tx:
            s = tx.session
            q = (
                select(MoveRow)
                .where(MoveRow.id.in_(ids), MoveRow.status == MoveStatus.PENDING.value)
                .order_by(MoveRow.id)
                .with_for_update(skip_locked=True)
            )
            rows = list(s.scalars(q))
            return _claimed(s, rows, worker, now)

    @contextmanager
    def locked(self, moves: Sequence[Move], worker: str) -> Iterator[None]:
        """Hold the fabric lock for ``moves``, run by ``worker``; on PostgreSQL, with the lock's
        session recorded on them (:meth:`mark_session`)."""
        with self.lock.held():
            if self.lock.session is not None:
                self.mark_session(moves, worker, self.lock.session)
            yield

    def mark_session(self, moves: Sequence[Move], worker: str, session: int) -> int:
        """Record on the running moves ``worker`` holds of ``moves`` the fabric-lock session
        ``session`` it runs them under (a watcher that sees it gone takes them over sooner:
        store/liveness.py); how many."""
        ids = [m.id for m in moves if m.id is not None]
        if not ids:
            return 0
        with self.store.tx() as tx:
            q = (
                update(MoveRow)
                .where(MoveRow.id.in_(ids), MoveRow.claimed_by == worker, MoveRow.status == MoveStatus.RUNNING.value)
                .values(lock_session=session)
            )
            return int(tx.session.execute(q).rowcount or 0)  # type: ignore[attr-defined]

    def requeue(self, moves: Sequence[Move], reason: str) -> list[Move]:
        """Put back in the queue, at their recorded phases, the running moves of ``moves`` still
        held by the claim each carries (a batch the store dropped mid-phase), with a progress event
        naming ``reason``; moves another worker took over are left to it. The requeued moves."""
        ids = [m.id for m in moves if m.id is not None]
        claims = {m.id: m.claimed_by for m in moves}
        with self.store.tx() as tx:
            s = tx.session
            rows = s.scalars(select(MoveRow).where(MoveRow.id.in_(ids)).order_by(MoveRow.id).with_for_update()).all()
            out = []
            for r in rows:
                if r.status != MoveStatus.RUNNING.value or r.claimed_by != claims.get(r.id):
                    continue
                r.status, r.claimed_by = MoveStatus.PENDING.value, None
                s.add(MoveEventRow(move_id=r.id, phase=r.phase[:16], message=f"requeued at {r.phase}: {reason}"[:2000]))
                out.append(move_to_domain(r))
            return out

    def reachable(self) -> bool:
        """Whether the store answers a query now."""
        try:
            with self.store.tx() as tx:
                s = tx.session
                s.execute(select(1))
        except DBAPIError:
            return False
        return True

    def expired_nodes(self) -> list[str]:
        """Nodes still marked leased whose lease has ended and that have no open move: each is
        due a release (the worker requests it on its next tick)."""
        now = datetime.now(UTC)
        active = (
            select(LeaseRow.id)
            .where(LeaseRow.node_id == NodeRow.id, lease_active_at(now))
            .exists()
        )
        busy = select(MoveRow.node).where(MoveRow.status.in_(OPEN))
        q = select(NodeRow.name).where(NodeRow.state == NodeState.LEASED.value, ~active, NodeRow.name.not_in(busy))
        with self.store.tx() as tx:  # one query: the worker asks every tick
            s = tx.session
            return sorted(s.scalars(q))

    def heartbeat(self, moves: list[Move], worker: str) -> int:
        """Refresh the heartbeat of the moves ``worker`` still holds; returns how many."""
        ids = [m.id for m in moves if m.id is not None]
        if not ids:
            return 0
        now = datetime.now(UTC)
        with self.store.tx(durable=False) as tx:
            s = tx.session
            rows = s.scalars(
                select(MoveRow).where(
                    MoveRow.id.in_(ids), MoveRow.claimed_by == worker, MoveRow.status == MoveStatus.RUNNING.value
                )
            ).all()
            for r in rows:
                r.heartbeat_at = now
            return len(rows)

    def set_phase(self, move: Move, phase: MovePhase) -> Move:
        return self.set_phases([move], phase)[0]

    def set_phases(
        self, moves: Sequence[Move], phase: MovePhase, events: Sequence[tuple[str, str, float | None]] = ()
    ) -> list[Move]:
        """Record ``phase`` for every move of a batch in one transaction (fenced by each claim),
        with ``events`` (phase, message, seconds) added to each move's progress events."""
        now = datetime.now(UTC)
        with self.store.tx() as tx:
            s = tx.session
            rows = self._rows(s, moves)
            for r in rows:
                for ph, message, seconds in events:
                    s.add(MoveEventRow(move_id=r.id, phase=ph[:16], message=message[:2000], seconds=seconds))
            nodes = locked_nodes(s, [r.node for r in rows]) if phase is MovePhase.DONE else {}
            for r in rows:
                r.phase = phase.value
                r.claimed_at = r.heartbeat_at = now
                if phase is MovePhase.DONE:
                    r.status = MoveStatus.DONE.value
                    node = nodes.get(r.node)
                    if node is not None:
                        node.state = (NodeState.AVAILABLE if r.to_tenant == QUARANTINE else NodeState.LEASED).value
            return [move_to_domain(r) for r in rows]

    def prepared(self, moves: Sequence[Move]) -> set[int]:
        """The ids of ``moves`` whose fabrics preparation (:meth:`mark_prepared`) is recorded."""
        with self.store.tx() as tx:
            return prepared_ids(tx.session, [m.id for m in moves if m.id is not None])

    def mark_prepared(self, moves: Sequence[Move], tx: Tx | None = None) -> None:
        """Record (event :data:`PREPARED`, fenced by each claim, one transaction) that the fabrics
        prepared ``moves``' nodes (``before_move``: gates passed, drained): from now on each move
        holds its node in quarantine (:meth:`Move.holds_node_in_quarantine`). ``tx``: the caller's
        transaction (the quarantine phase's, which reads the holds it adds: flushed first)."""
        with self.store.tx(tx) as tx:
            s = tx.session
            for r in self._rows(s, moves):
                s.add(MoveEventRow(move_id=r.id, phase=PREPARED, message="prepared on every fabric: held in quarantine"))
            s.flush()

    def swap_lease(self, move: Move) -> Move:
        return self.swap_leases([move])[0]

    def swap_leases(self, moves: Sequence[Move], tx: Tx | None = None) -> list[Move]:
        """For moves whose quarantine is verified: end each node's current lease and start the
        new one; phase -> join. One transaction for the whole batch (``tx``: the caller's, which
        goes on to read what join applies).

        A move whose own lease cannot start (its network or offering deleted since the request,
        an overlapping lease, ...) fails alone, at phase swap with the reason, in the same
        transaction: its node stays in quarantine (a failed move holds it there) and the other
        moves of the batch swap. Only then is each move swapped on its own (savepoints): the
        whole batch is tried first, at the cost of one."""
        now = datetime.now(UTC)
        with self.store.tx(tx) as tx:
            s = tx.session
            rows = self._rows(s, moves)
            nodes = locked_nodes(s, [r.node for r in rows])
            try:
                with s.begin_nested():
                    swap(s, rows, nodes, now)
            except GpufabricError:
                for r in rows:
                    try:
                        with s.begin_nested():
                            swap(s, [r], nodes, now)
                    except GpufabricError as e:
                        r.status, r.phase = MoveStatus.FAILED.value, MovePhase.SWAP.value
                        r.error = f"lease swap: {e.message}"[:2000]
                        s.add(MoveEventRow(move_id=r.id, phase="swap", message=r.error))
            s.flush()
            return [move_to_domain(r) for r in rows]

    def record_running(self, worker: str, phase: str, message: str, seconds: float | None = None) -> None:
        """A progress event on every move ``worker`` runs now (one transaction)."""
        self.record_running_many(worker, [(phase, message, seconds)])

    def record_running_many(self, worker: str, events: Sequence[tuple[str, str, float | None]]) -> None:
        """Progress events ``(phase, message, seconds)``, in order, on every move ``worker`` runs now (one
        transaction; a report, not fsynced at its commit: the move's next phase commit makes it durable)."""
        with self.store.tx(durable=False) as tx:
            s = tx.session
            running = select(MoveRow.id).where(MoveRow.claimed_by == worker, MoveRow.status == MoveStatus.RUNNING.value)
            ids = s.scalars(running).all()
            for phase, message, seconds in events:
                for i in ids:
                    s.add(MoveEventRow(move_id=i, phase=phase[:16], message=message[:2000], seconds=seconds))

    def record_events(self, events: Sequence[tuple[int, str, str, float | None]]) -> None:
        """Events ``(move id, phase, message, seconds)`` of any moves, in one transaction (reports, as
        :meth:`record_running_many`: not fsynced at their commit)."""
        with self.store.tx(durable=False) as tx:
            for move_id, phase, message, seconds in events:
                tx.session.add(MoveEventRow(move_id=move_id, phase=phase[:16], message=message[:2000], seconds=seconds))

    def fail(self, move: Move, error: str) -> Move:
        with self.store.tx() as tx:
            s = tx.session
            r = self._row(s, move)
            r.status, r.error = MoveStatus.FAILED.value, error[:2000]
            return move_to_domain(r)

    def refuse(self, moves: Sequence[Move], error: str) -> list[Move]:
        """Cancel moves a fabric refused before anything changed (``FabricBackend.before_move``):
        status cancelled with ``error``; each node back to leased (it has a current lease) or
        available. One transaction."""
        now = datetime.now(UTC)
        with self.store.tx() as tx:
            s = tx.session
            rows = self._rows(s, moves)
            nodes = locked_nodes(s, [r.node for r in rows])
            leased = set(s.scalars(select(LeaseRow.node_id).where(
                LeaseRow.node_id.in_([n.id for n in nodes.values()]), lease_active_at(now))))  # fmt: skip
            for r in rows:
                r.status, r.error = MoveStatus.CANCELLED.value, error[:2000]
                s.add(MoveEventRow(move_id=r.id, phase=r.phase[:16], message=f"refused: {error}"[:2000], seconds=None))
                node = nodes.get(r.node)
                if node is not None and node.state == NodeState.MOVING.value:
                    node.state = (NodeState.LEASED if node.id in leased else NodeState.AVAILABLE).value
            return [move_to_domain(r) for r in rows]

    def retry(self, move_id: int) -> Move:
        """Put a failed move back in the queue; it resumes at its recorded phase."""
        with self.store.tx() as tx:
            s = tx.session
            r = s.get(MoveRow, move_id, with_for_update=True)
            if r is None:
                raise NotFoundError("move", str(move_id))
            if r.status != MoveStatus.FAILED.value:
                raise ConflictError(f"move {move_id} is {r.status}, not failed", move=move_id)
            r.status, r.error, r.claimed_by = MoveStatus.PENDING.value, "", None
            return move_to_domain(r)

    @staticmethod
    def _row(s: Session, move: Move) -> MoveRow:
        return MoveLedger._rows(s, [move])[0]

    @staticmethod
    def _rows(s: Session, moves: Sequence[Move]) -> list[MoveRow]:
        """The moves' rows (in order), locked, if the claim each move carries is still its row's
        (fencing): :class:`ClaimLostError` otherwise."""
        ids = [m.id for m in moves]
        assert None not in ids
        found = {r.id: r for r in s.scalars(select(MoveRow).where(MoveRow.id.in_(ids)).with_for_update())}
        out = []
        for move in moves:
            r = found.get(move.id)  # type: ignore[arg-type]
            if r is None:
                raise NotFoundError("move", str(move.id))
            if move.claimed_by is not None and r.claimed_by != move.claimed_by:
                raise ClaimLostError(
                    f"move {move.id} is now held by {r.claimed_by} (this worker {move.claimed_by} went stale)",
                    move=move.id,
                )
            out.append(r)
        return out

