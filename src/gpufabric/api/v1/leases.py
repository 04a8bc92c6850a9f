"""v1 leases: list (filter by tenant, node, state), show, create, end."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from gpufabric.api.deps import CTX, PAGE, PRINCIPAL, ApiContext, Page, json, paged
from gpufabric.api.v1.schemas import NAME_PATTERN, LeaseIn, LeaseOut, LeasePage, errors
from gpufabric.domain.auth import Principal
from gpufabric.domain.errors import NotFoundError

router = APIRouter(tags=["leases"])
NameQ = Annotated[str | None, Query(max_length=63, pattern=NAME_PATTERN)]
LeaseId = Annotated[int, Path(ge=1, le=2**31 - 1)]


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
    status_code=201,
    summary="Lease a node to a tenant (the serve worker applies it on the fabrics)",
    responses={201: {"model": LeaseOut}, **errors(403, 404, 409)},
)
def create_lease(body: LeaseIn, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    lease = c.actions.create_lease(
        p, body.tenant, body.node, tuple(body.networks), body.offering, body.start, body.end
    )
    now = datetime.now(UTC)
    return json(
        {
            "id": lease.id,
            "tenant": lease.tenant,
            "node": lease.node,
            "start": lease.start.astimezone(UTC).isoformat(),
            "end": lease.end.astimezone(UTC).isoformat() if lease.end else None,
            "networks": list(lease.networks),
            "offering": lease.offering,
            "owner": lease.owner,
            "gpus": lease.gpus,
            "active": lease.active_at(now),
        },
        201,
    )


@router.delete(
    "/leases/{lease_id}",
    summary="End a lease now (the node goes to quarantine); the lease stays in the history",
    responses={200: {"model": LeaseOut}, **errors(403, 404, 409)},
)
def end_lease(lease_id: LeaseId, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    c.actions.end_lease(p, lease_id)
    items, _ = c.reader.leases(p, 1, 0, lease_id=lease_id)
    if items:
        return json(items[0])
    raise NotFoundError("lease", str(lease_id))  # a scheduled lease ended before it started is gone
