"""The REST API (FastAPI; OpenAPI schema at ``/openapi.json``) that ``gpufabric serve`` runs.

Read endpoints return the same JSON as the CLI's ``--json``; write endpoints go through
the same store and workflows. Errors map to HTTP codes from the error tree.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, Field

from gpufabric.domain.errors import ConflictError, ExhaustedError, GpufabricError, NotFoundError, ValidationError
from gpufabric.domain.models import Lease
from gpufabric.domain.serial import jsonable

_STATUS = {NotFoundError: 404, ConflictError: 409, ExhaustedError: 409, ValidationError: 422}


class TenantIn(BaseModel):
    name: str = Field(description="Tenant name: 1-63 chars of a-z 0-9 . _ -")


class NetworkIn(BaseModel):
    name: str
    tenant: str


class LeaseIn(BaseModel):
    tenant: str
    node: str
    networks: list[str] = []
    offering: str = "baremetal"
    end: datetime | None = None


def create_app(
    open_store: Callable[[], Any], segment_config: Callable[[], Any], metrics: Callable[[], str] | None = None
) -> FastAPI:
    app = FastAPI(
        title="gpufabric",
        version="0.1.0",
        description="Lease GPU nodes to tenants, isolated on Ethernet, InfiniBand, NVLink and DPU fabrics.",
    )
    store = open_store()

    @app.exception_handler(GpufabricError)
    async def _err(_req: Request, e: GpufabricError) -> JSONResponse:
        code = next((c for t, c in _STATUS.items() if isinstance(e, t)), 500)
        return JSONResponse(e.to_dict(), status_code=code)

    @app.get("/nodes", summary="List nodes with their ports on every fabric")
    def nodes() -> Any:
        return jsonable(store.nodes())

    @app.get("/nodes/{name}", summary="One node")
    def node(name: str) -> Any:
        return jsonable(store.node(name))

    @app.get("/tenants")
    def tenants() -> Any:
        return jsonable(store.tenants())

    @app.post("/tenants", status_code=201)
    def create_tenant(t: TenantIn) -> Any:
        return jsonable(store.create_tenant(t.name))

    @app.get("/networks")
    def networks(tenant: str | None = None) -> Any:
        return jsonable(store.networks(tenant))

    @app.post("/networks", status_code=201)
    def create_network(n: NetworkIn) -> Any:
        return jsonable(store.create_network(n.name, n.tenant, segment_config()))

    @app.get("/leases")
    def leases() -> Any:
        return jsonable(store.leases())

    @app.post("/leases", status_code=201)
    def create_lease(x: LeaseIn) -> Any:
        lease = Lease(x.tenant, x.node, datetime.now(UTC), x.end, tuple(x.networks), x.offering)
        return jsonable(store.create_lease(lease))

    @app.delete("/leases/{lease_id}")
    def delete_lease(lease_id: int) -> Any:
        return jsonable(store.delete_lease(lease_id))

    @app.get("/metrics", response_class=PlainTextResponse, summary="Prometheus metrics")
    def prom() -> str:
        return metrics() if metrics else ""

    return app
