"""Offers: a lease an owner offered into another tenant (a move with status ``offered``), accepted
(it becomes pending: the worker runs it, its node is marked moving) or declined (cancelled; the
node never left quarantine). One transaction each, the node's row locked."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.orm import Session

from gpufabric.domain.errors import ConflictError, NotFoundError
from gpufabric.domain.models import NodeState
from gpufabric.domain.moves import Move, MoveStatus
from gpufabric.service.db_models import MoveRow
from gpufabric.service.move_requests import locked_nodes
from gpufabric.service.store import Store
from gpufabric.service.store_moves import move_to_domain


def decide_offer(store: Store, move_id: int, accept: bool, also: Callable[[Session], None] | None = None) -> Move:
    """Accept an offered move (it becomes pending: the worker runs it; its node is marked
    moving) or decline it (cancelled; its node never left quarantine). ConflictError unless
    the move is an open offer."""
    with store._tx() as s:
        r = s.get(MoveRow, move_id, with_for_update=True)
        if r is None:
            raise NotFoundError("move", str(move_id))
        if r.status != MoveStatus.OFFERED.value:
            raise ConflictError(f"move {move_id} is {r.status}, not an open offer", move=move_id)
        if accept:
            node = locked_nodes(s, [r.node]).get(r.node)
            if node is None:
                raise NotFoundError("node", r.node)
            if node.state == NodeState.MAINTENANCE.value:
                raise ConflictError(f"node {r.node} is in maintenance: not leasable", node=r.node)
            node.state = NodeState.MOVING.value
            r.status = MoveStatus.PENDING.value
        else:
            r.status, r.error = MoveStatus.CANCELLED.value, "offer declined"
        if also is not None:
            also(s)
        s.flush()
        return move_to_domain(r)
