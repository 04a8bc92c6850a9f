"""v1 leases: list (filter by tenant, node, state), show, create, end; offers (an owner's lease into
another tenant) accepted or declined by that tenant."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from gpufabric.api.deps import CTX, PAGE, PRINCIPAL, ApiContext, Page, json, paged
from gpufabric.api.v1.kind_fields import body_terms
from gpufabric.api.v1.schemas import (
    NAME_PATTERN,
    LeaseEndOut,
    LeaseIn,
    LeaseOut,
    LeasePage,
    MoveOut,
    MovePage,
    errors,
    networks_arg,
)
from gpufabric.domain.auth import Principal
from gpufabric.domain.errors import NotFoundError
from gpufabric.domain.move_json import lease_out, move_out
from gpufabric.store.registry import registered_terms

router = APIRouter(tags=["leases"])
NameQ = Annotated[str | None, Query(max_length=63, pattern=NAME_PATTERN)]
LeaseId = Annotated[int, Path(ge=1, le=2**31 - 1)]
MoveId = Annotated[int, Path(ge=1, le=2**31 - 1)]


@router.get("/leases", responses={200: {"model": LeasePage}, **errors(304)})
async def list_leases(
    request: Request,
    p: Principal = PRINCIPAL,
    c: ApiContext = CTX,
    pg: Page = PAGE,
    tenant: NameQ = None,
    node: NameQ = None,
    state: Literal["active", "ended", "scheduled"] | None = None,
) -> Response:
    return await c.cached(
        request,
        (p.role, p.tenant),
        lambda: paged(*c.reader.leases(p, pg.limit, pg.offset, tenant, node, state), pg),
    )


@router.get("/leases/{lease_id}", responses={200: {"model": LeaseOut}, **errors(304, 404)})
async def show_lease(request: Request, lease_id: LeaseId, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    def build() -> dict[str, Any]:
        items, _ = c.reader.leases(p, 1, 0, lease_id=lease_id)
        if not items:
            raise NotFoundError("lease", str(lease_id))
        return items[0]

    return await c.cached(request, (p.role, p.tenant), build)


@router.post(
    "/leases",
    status_code=202,
    summary="Lease an available node: returns at once the move from quarantine that grants it (run by the worker)",
    responses={202: {"model": MoveOut}, **errors(403, 404, 409, 429)},
)
def create_lease(body: LeaseIn, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    move = c.actions.create_lease(
        p, body.tenant, body.node, networks_arg(body.networks), body.offering, body.start, body.end, body_terms(body),
        slot=body.slot,
    )
    return json(move_out(move), 202)


@router.delete(
    "/leases/{lease_id}",
    status_code=202,
    summary="End a lease now: the move that releases its node to quarantine (none for a lease not active); "
    "the lease stays in the history, ended by that move",
    responses={202: {"model": LeaseEndOut}, **errors(403, 404, 409)},
)
def end_lease(lease_id: LeaseId, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    lease, move = c.actions.end_lease(p, lease_id)
    now = datetime.now(UTC)
    out = lease_out(lease, now, [t.name for t in registered_terms()])
    return json({"lease": out, "move": move_out(move) if move is not None else None}, 202)


@router.get("/offers", responses={200: {"model": MovePage}, **errors(304)})
async def list_offers(request: Request, p: Principal = PRINCIPAL, c: ApiContext = CTX, pg: Page = PAGE) -> Response:
    """Leases offered into the caller's tenant (or made by its owner) that wait for an answer."""
    return await c.cached(
        request, (p.role, p.tenant), lambda: paged(*c.reader.moves(p, pg.limit, pg.offset, state="offered"), pg)
    )


@router.post(
    "/offers/{move_id}/accept",
    status_code=202,
    summary="Accept a lease offered into your tenant: the grant's move runs (admin, or the tenant's owner/lessee)",
    responses={202: {"model": MoveOut}, **errors(403, 404, 409, 429)},
)
def accept_offer(move_id: MoveId, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    return json(move_out(c.actions.decide_offer(p, move_id, True)), 202)


@router.post(
    "/offers/{move_id}/decline",
    status_code=200,
    summary="Decline a lease offered into your tenant (or withdraw your own offer as the node's owner)",
    responses={200: {"model": MoveOut}, **errors(403, 404, 409)},
)
def decline_offer(move_id: MoveId, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    return json(move_out(c.actions.decide_offer(p, move_id, False)), 200)
