"""A move's status transitions that a person asks for, and offers.

:func:`transition` is the one place that says which status a move may leave for which verb
(``accept``/``decline`` an offer, ``cancel`` a pending or failed move): it locks the move's row,
refuses (ConflictError naming the status) a move that is not in a status the verb leaves, and sets
the new status. Offers: a lease an owner offered into another tenant (a move with status
``offered``), accepted (it becomes pending: the worker runs it, its node is marked moving) or
declined (cancelled; the node never left quarantine). Cancel: :mod:`gpufabric.store.move_cancel`.
An offer is its owner's: :func:`withdraw` cancels the open offers of a node whose owner changes,
and those made into or by a tenant that is deleted, each with an ``offer.withdraw`` event.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpufabric.domain.auth import Principal
from gpufabric.domain.errors import ConflictError, NotFoundError
from gpufabric.domain.models import NodeState
from gpufabric.domain.moves import Move, MoveStatus
from gpufabric.store.auth import EventLog
from gpufabric.store.move_requests import locked_nodes
from gpufabric.store.moves import move_to_domain
from gpufabric.store.tables import MoveRow
from gpufabric.store.tx import Tx

TRANSITIONS: Final[dict[str, tuple[tuple[MoveStatus, ...], MoveStatus]]] = {
    "accept": ((MoveStatus.OFFERED,), MoveStatus.PENDING),
    "decline": ((MoveStatus.OFFERED,), MoveStatus.CANCELLED),
    "cancel": ((MoveStatus.PENDING, MoveStatus.FAILED), MoveStatus.CANCELLED),
}
"""verb -> (the statuses it leaves, the status it sets)."""


def transition(s: Session, move_id: int, verb: str) -> tuple[MoveRow, MoveStatus]:
    """Lock move ``move_id`` and move it to ``verb``'s status; (its row, the status it had).
    NotFoundError, or ConflictError when its status is not one ``verb`` leaves."""
    r = s.get(MoveRow, move_id, with_for_update=True)
    if r is None:
        raise NotFoundError("move", str(move_id))
    leaves, sets = TRANSITIONS[verb]
    was = MoveStatus(r.status)
    if was not in leaves:
        if verb != "cancel":
            raise ConflictError(f"move {move_id} is {r.status}, not an open offer", move=move_id)
        why = "a worker runs it now; wait until it is done or failed" if was is MoveStatus.RUNNING else "it has ended"
        raise ConflictError(
            f"move {move_id} is {r.status} (at {r.phase}): {why}; only a pending or failed move can be cancelled",
            move=move_id, field="status", value=r.status, allowed=", ".join(x.value for x in leaves),
        )  # fmt: skip
    r.status = sets.value
    return r, was


def decide_offer(tx: Tx, move_id: int, accept: bool) -> Move:
    """Accept an offered move (it becomes pending: the worker runs it; its node is marked
    moving) or decline it (cancelled; its node never left quarantine), in the caller's
    transaction ``tx``. ConflictError unless the move is an open offer."""
    s = tx.session
    r, _ = transition(s, move_id, "accept" if accept else "decline")
    if accept:
        node = locked_nodes(s, [r.node]).get(r.node)
        if node is None:
            raise NotFoundError("node", r.node)
        if node.state == NodeState.MAINTENANCE.value:
            raise ConflictError(f"node {r.node} is in maintenance: not leasable", node=r.node)
        node.state = NodeState.MOVING.value
    else:
        r.error = "offer declined"
    s.flush()
    return move_to_domain(r)


def withdraw(
    s: Session, by: Principal, why: str, *, node: str | None = None, tenant: str | None = None, feed: bool = True
) -> list[int]:
    """Cancel the open offers of ``node`` (when its owner changes), or those made into or by
    ``tenant`` (when it is deleted), each with ``why`` as its error and an ``offer.withdraw``
    event by ``by`` in the receiving tenant's feed (``feed``; else the operators' only).
    The ids withdrawn. Nothing ran for an offer: its node never left quarantine."""
    q = select(MoveRow).where(MoveRow.status == MoveStatus.OFFERED.value).order_by(MoveRow.id).with_for_update()
    if node is not None:
        q = q.where(MoveRow.node == node)
    if tenant is not None:
        q = q.where((MoveRow.to_tenant == tenant) | MoveRow.requested_by.endswith(f"@{tenant}", autoescape=True))
    ids = []
    for r in s.scalars(q):
        r.status, r.error = MoveStatus.CANCELLED.value, why
        event = EventLog.row(by, "offer.withdraw", str(r.id), True, why, r.to_tenant)
        if not feed:
            event.tenant = None
        s.add(event)
        ids.append(r.id)
    s.flush()
    return ids
