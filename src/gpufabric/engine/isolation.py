"""Which moves of a batch a failed join *plan* belongs to (issue 18, finding 3).

Planning the join phase can fail for one move alone — e.g. the NVLink allocator finds no
partition of the GPU count a lease asks for on that node (the service cannot know the baseboard's
partition sizes when the move is requested), or a fabric refuses the node (FabricPlan.refusals:
an Ethernet bond member read in a port-channel the switch does not have). Nothing has been applied then. Each move of the
batch is planned again on its own: the batch's other nodes held in quarantine and the move's own
lease as the swap starts it, against the same observed state. The moves whose own plan fails are
the culprits: they fail alone (their nodes held in quarantine) and the rest of the batch goes on.
When no move fails alone (the failure is the fabric's, or the batch's as a whole), the whole
batch fails as before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from gpufabric.domain.errors import GpufabricError
from gpufabric.domain.fabric import FabricKind
from gpufabric.domain.models import QUARANTINE, Lease
from gpufabric.domain.moves import Move, MovePhase
from gpufabric.domain.state import FabricState
from gpufabric.planning.desired import DesiredState
from gpufabric.planning.plan import Plan, plan
from gpufabric.store.moves import MoveLedger
from gpufabric.store.view import Epoch, StoreView

Desire = Callable[[StoreView, Sequence[str], Sequence[Lease]], DesiredState]  # (view, extra quarantine, leases)


class BatchEngine(Protocol):
    """What :func:`fail_alone` reads of the move engine (:class:`~gpufabric.engine.moves.MoveEngine`)."""

    @property
    def kinds(self) -> Sequence[FabricKind[Any, Any]]: ...

    @property
    def ledger(self) -> MoveLedger: ...

    def view(self) -> StoreView: ...

    def desired(
        self, view: StoreView | None = None, extra_quarantine: Sequence[str] = (), leases: Sequence[Lease] | None = None
    ) -> DesiredState: ...

    def known_state(self, epoch: Epoch | None = None) -> tuple[FabricState, bool]: ...


class JoinPlanError(GpufabricError):
    """Planning the join phase failed (nothing applied): ``cause`` is the planner's error."""

    def __init__(self, cause: GpufabricError) -> None:
        super().__init__(cause.message, **cause.fields)
        self.code = cause.code
        self.cause = cause


def refuse_joining(p: Plan, nodes: Collection[str]) -> Plan:
    """``p``, unless a fabric refuses to give one of ``nodes`` its tenant (FabricPlan.refusals):
    that refusal is raised. Refusals of other nodes (already leased) do not stop ``p``."""
    refused = p.refusals()
    for node in sorted(nodes):
        if node in refused:
            raise refused[node]
    return p


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
            Lease(m.to_tenant, m.node, now, m.lease_end, m.networks, m.offering or "baremetal", terms=m.terms)]  # fmt: skip
        alone = dataclasses.replace(view, held_in_quarantine=view.held_in_quarantine - {m.node})
        try:
            p = plan(kinds, desire(alone, sorted(nodes - {m.node}), [*others, *own]), state)
            refuse_joining(p, [x.node for x in own])
        except GpufabricError as e:
            out[m.id] = e
    return out


def fail_alone(engine: BatchEngine, batch: Sequence[Move]) -> list[Move] | None:
    """After a failed join plan: fail alone the moves of ``batch`` whose own join plan fails
    (their nodes are held in quarantine), each with its own error; the failed moves, or None when
    no move fails alone, or every one does (the batch then fails as a whole)."""
    with engine.ledger.lock.held():
        state, _ = engine.known_state()
    culprits = join_culprits(engine.kinds, lambda v, q, ls: engine.desired(v, q, ls), engine.view(), state, batch)
    if not culprits or len(culprits) == len(batch):
        return None
    out = []
    for m in batch:
        if m.id in culprits:
            at = engine.ledger.set_phase(m, MovePhase.SWAP) if m.phase is MovePhase.QUARANTINE else m
            out.append(engine.ledger.fail(at, f"join plan: {culprits[m.id].message}"))
    return out


def failsafe(converge: Callable[..., Any], nodes: Sequence[str], cause: GpufabricError) -> None:
    """Send every port of ``nodes`` on every fabric to quarantine (best effort: a fabric that
    failed may fail again; what it holds is then reported by the audit); ``cause`` says which."""
    try:
        converge("failsafe", extra_quarantine=nodes)
        cause.fields["failsafe"] = "quarantined"
    except GpufabricError as e:
        cause.fields["failsafe"] = f"quarantine failed too: {e.message}"
