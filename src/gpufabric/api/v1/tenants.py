"""v1 tenants, networks (with explicit segments to adopt) and offerings."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from gpufabric.api.deps import CTX, PAGE, PRINCIPAL, ApiContext, Page, json, paged
from gpufabric.api.v1.schemas import (
    NAME_PATTERN,
    NetworkIn,
    NetworkOut,
    NetworkPage,
    OfferingOut,
    OfferingPage,
    TenantIn,
    TenantOut,
    TenantPage,
    errors,
)
from gpufabric.api.v1.schemas_networks import NetworkPatch
from gpufabric.domain.auth import Principal
from gpufabric.domain.errors import NotFoundError
from gpufabric.engine.columns import with_segment_views

router = APIRouter()
NameP = Annotated[str, Path(min_length=1, max_length=63, pattern=NAME_PATTERN)]
NameQ = Annotated[str | None, Query(max_length=63, pattern=NAME_PATTERN)]


@router.get("/tenants", tags=["tenants"], responses={200: {"model": TenantPage}, **errors(304)})
async def list_tenants(request: Request, p: Principal = PRINCIPAL, c: ApiContext = CTX, pg: Page = PAGE) -> Response:
    return await c.cached(request, (p.role, p.tenant), lambda: paged(*c.reader.tenants(p, pg.limit, pg.offset), pg))


@router.post("/tenants", status_code=201, tags=["tenants"], responses={201: {"model": TenantOut}, **errors(403, 409)})
def create_tenant(body: TenantIn, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    c.actions.create_tenant(p, body.name)
    return json(c.reader.tenants(p, 1, 0, body.name)[0][0], 201)


@router.get("/tenants/{tenant}", tags=["tenants"], responses={200: {"model": TenantOut}, **errors(304, 404)})
async def show_tenant(request: Request, tenant: NameP, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    def build() -> dict[str, Any]:
        items, _ = c.reader.tenants(p, 1, 0, tenant)
        if not items:
            raise NotFoundError("tenant", tenant)
        return items[0]

    return await c.cached(request, (p.role, p.tenant), build)


@router.delete(
    "/tenants/{tenant}",
    tags=["tenants"],
    summary="Delete a tenant (refused while leases or networks use it or it owns nodes, naming them;"
            " the offers into it are withdrawn)",
    responses={200: {"model": TenantOut}, **errors(403, 404, 409)},
)
def delete_tenant(tenant: NameP, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    t = c.actions.delete_tenant(p, tenant)
    return json({"name": t.name, "created_at": None})


@router.get("/networks", tags=["networks"], responses={200: {"model": NetworkPage}, **errors(304)})
async def list_networks(
    request: Request, p: Principal = PRINCIPAL, c: ApiContext = CTX, pg: Page = PAGE, tenant: NameQ = None
) -> Response:
    def build() -> dict[str, Any]:
        items, total = c.reader.networks(p, pg.limit, pg.offset, tenant)
        return paged(with_segment_views(items, _kinds(c)), total, pg)

    return await c.cached(request, (p.role, p.tenant), build)


@router.post(
    "/networks",
    status_code=201,
    tags=["networks"],
    summary="Create a tenant network; explicit segments are adopted (validated against the configured ranges)",
    responses={201: {"model": NetworkOut}, **errors(403, 404, 409, 429)},
)
def create_network(body: NetworkIn, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    segs = {s.fabric: s.seg_id for s in body.segments or []}  # one per fabric instance (NetworkIn)
    c.actions.create_network(p, body.name, body.tenant, segs, body.fabrics, body.options, body.description, body.tags)
    return json(_one(c, p, body.tenant, body.name), 201)


@router.get("/networks/{tenant}/{name}", tags=["networks"], responses={200: {"model": NetworkOut}, **errors(304, 404)})
async def show_network(request: Request, tenant: NameP, name: NameP, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    return await c.cached(request, (p.role, p.tenant), lambda: _one(c, p, tenant, name))


@router.patch(
    "/networks/{tenant}/{name}",
    tags=["networks"],
    summary="Rename, describe or tag a network (its tenant and segments are not updatable)",
    responses={200: {"model": NetworkOut}, **errors(403, 404, 409)},
)
def update_network(tenant: NameP, name: NameP, body: NetworkPatch, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    n = c.actions.update_network(p, name, tenant, body.name, body.description, body.tags)
    return json(_one(c, p, tenant, n.name))


@router.delete(
    "/networks/{tenant}/{name}",
    tags=["networks"],
    summary="Delete a network (refused while leases use it, naming them)",
    responses={200: {"model": NetworkOut}, **errors(403, 404, 409)},
)
def delete_network(tenant: NameP, name: NameP, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    found = _one(c, p, tenant, name)
    c.actions.delete_network(p, name, tenant)
    return json(found)


def _one(c: ApiContext, p: Principal, tenant: str, name: str) -> dict[str, Any]:
    """The network ``tenant``/``name`` as ``p`` sees it, its segments labelled by their kinds (NotFoundError)."""
    items, _ = c.reader.networks(p, 1, 0, tenant, name)
    if not items:
        raise NotFoundError("network", f"{tenant}/{name}")
    return with_segment_views(items, _kinds(c))[0]


def _kinds(c: ApiContext) -> Any:
    """The fabric instances a network's segments are on (the ones new networks span)."""
    return c.network_kinds() or c.view_kinds()


@router.get("/offerings", tags=["offerings"], responses={200: {"model": OfferingPage}, **errors(304)})
async def list_offerings(request: Request, p: Principal = PRINCIPAL, c: ApiContext = CTX, pg: Page = PAGE) -> Response:
    return await c.cached(request, ("all",), lambda: paged(*c.reader.offerings(pg.limit, pg.offset), pg))


@router.get("/offerings/{name}", tags=["offerings"], responses={200: {"model": OfferingOut}, **errors(304, 404)})
async def show_offering(request: Request, name: NameP, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    def build() -> dict[str, Any]:
        items, _ = c.reader.offerings(1, 0, name)
        if not items:
            raise NotFoundError("offering", name)
        return items[0]

    return await c.cached(request, ("all",), build)
