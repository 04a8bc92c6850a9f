"""Which moves of a batch a failed join *plan* belongs to (issue 18, finding 3).

Planning the join phase can fail for one move alone — e.g. the NVLink allocator finds no
partition of the GPU count a lease asks for on that node (the service cannot know the baseboard's
partition sizes when the move is requested). Nothing has been applied then. Each move of the
batch is planned again on its own: the batch's other nodes held in quarantine and the move's own
lease as the swap starts it, against the same observed state. The moves whose own plan fails are
the culprits: they fail alone (their nodes held in quarantine) and the rest of the batch goes on.
When no move fails alone (the failure is the fabric's, or the batch's as a whole), the whole
batch fails as before. Pure: planning only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from gpufabric.domain.errors import GpufabricError
from gpufabric.domain.fabric import FabricKind
from gpufabric.domain.models import QUARANTINE, Lease
from gpufabric.domain.moves import Move
from gpufabric.domain.state import FabricState
from gpufabric.planning.desired import DesiredState
from gpufabric.planning.plan import plan
from gpufabric.service.store_view import StoreView

Desire = Callable[[StoreView, Sequence[str], Sequence[Lease]], DesiredState]  # (view, extra quarantine, leases)


class JoinPlanError(GpufabricError):
    """Planning the join phase failed (nothing applied): ``cause`` is the planner's error."""

    def __init__(self, cause: GpufabricError) -> None:
        super().__init__(cause.message, **cause.fields)
        self.code = cause.code
        self.cause = cause


def join_culprits(
    kinds: Sequence[FabricKind[Any, Any]], desire: Desire, view: StoreView, state: FabricState, batch: Sequence[Move]
) -> dict[int, GpufabricError]:
    """Move id -> its own planning error, for the moves of ``batch`` whose join fails alone."""
    nodes = {m.node for m in batch}
    now = datetime.now(UTC)
    others = [x for x in view.leases if x.node not in nodes]
    out: dict[int, GpufabricError] = {}
    for m in batch:
        if m.id is None:
            continue
        own = [] if m.to_tenant == QUARANTINE else [
            Lease(m.to_tenant, m.node, now, m.lease_end, m.networks, m.offering or "baremetal", gpus=m.gpus)]  # fmt: skip
        alone = dataclasses.replace(view, held_in_quarantine=view.held_in_quarantine - {m.node})
        try:
            plan(kinds, desire(alone, sorted(nodes - {m.node}), [*others, *own]), state)
        except GpufabricError as e:
            out[m.id] = e
    return out
