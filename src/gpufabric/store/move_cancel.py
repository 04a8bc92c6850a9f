"""Cancelling a move (``gpufabric move cancel ID``, ``POST /api/v1/moves/{id}/cancel``).

Only a move that no worker runs now can be cancelled: a pending one (queued or scheduled) or a
failed one; a running move is refused (ConflictError naming its status), as is a finished one.

* **Never started** (pending, never claimed: ``attempts == 0``): nothing has touched the
  fabrics for it, so it is simply cancelled — the node stays with the tenant it has now (its
  lease, if any, is untouched) and leaves ``moving``. If a converge had already put its ports in
  quarantine (a queued move holds its node there), the next converge returns them to that tenant:
  quarantine -> its tenant, never two tenants.
* **Started** (failed, or pending again after a failure or a store outage: ``attempts > 0``): its
  ports were sent to quarantine (or are on their way), so the node returns to quarantine: the
  lease active now — the old one if the swap never committed, the new one if it did — ends now
  and the node is ``available``. A failsafe that failed too leaves ports the next converge puts
  in quarantine, the only tenant the node has.

Both record a progress event on the move; the caller (:class:`~gpufabric.workflow.actions.Actions`)
records the principal's event and asks the worker to converge.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select

from gpufabric.domain.models import NodeState
from gpufabric.domain.moves import Move
from gpufabric.domain.values import check_id
from gpufabric.store.core import Store
from gpufabric.store.move_requests import locked_nodes
from gpufabric.store.moves import move_to_domain
from gpufabric.store.offers import transition
from gpufabric.store.tables import LeaseRow, MoveEventRow, lease_active_at
from gpufabric.store.tx import Tx


def cancel(store: Store, move_id: int, requested_by: str = "", tx: Tx | None = None) -> Move:
    """Cancel move ``move_id`` (see the module docstring), in one transaction (``tx``: the caller's)."""
    check_id("move_id", move_id)
    now = datetime.now(UTC)
    with store.tx(tx) as tx:
        s = tx.session
        r, was = transition(s, move_id, "cancel")
        node = locked_nodes(s, [r.node]).get(r.node)
        active = []
        if node is not None:
            active = list(
                s.scalars(
                    select(LeaseRow).where(
                        LeaseRow.node_id == node.id, lease_active_at(now)
                    )
                )
            )
        by = f" by {requested_by}" if requested_by else ""
        if r.attempts == 0:
            message = f"cancelled{by} before it started: node {r.node} stays in {r.from_tenant}"
            if node is not None and node.state == NodeState.MOVING.value:
                node.state = (NodeState.LEASED if active else NodeState.AVAILABLE).value
        else:
            for lease in active:
                lease.end = now
            ended = f" (lease {', '.join(str(x.id) for x in active)} ended)" if active else ""
            message = f"cancelled{by} at {r.phase} ({was.value}): node {r.node} returns to quarantine{ended}"
            if node is not None and node.state in (NodeState.MOVING.value, NodeState.LEASED.value):
                node.state = NodeState.AVAILABLE.value
        r.claimed_by = None  # its error (if it failed) is kept
        s.add(MoveEventRow(move_id=r.id, phase="cancel", message=message[:2000]))
        s.flush()
        return move_to_domain(r)
