"""``GET /api/v1/offload``, the DPU kind's own route (contributed through
:meth:`DpuKind.api_router`; the principal, the fabrics and the error answers come from the
API's :class:`~gpufabric.domain.views.ApiHost`): the offload report read now, as
``gpufabric offload report --json`` prints it."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel

from gpufabric.domain.auth import Principal, Verb
from gpufabric.domain.errors import UnavailableError
from gpufabric.domain.views import ApiHost, FabricAccess
from gpufabric.fabrics.dpu.backend.offload import site_report

FABRIC = "dpu"  # the instance the route reads (the default instance of the kind)


class OffloadOut(BaseModel):
    """``gpufabric offload report --json``: rows per node and tenant, tables, alerts."""

    rows: list[dict[str, Any]]
    tables: list[dict[str, Any]]
    alerts: list[dict[str, Any]]


def build(host: ApiHost) -> APIRouter:
    """The router of the DPU kind's routes over ``host``."""
    router = APIRouter()

    @router.get("/offload", tags=["offload"],
                summary="DPU offload now: flows and bytes in hw / tc / datapath per tenant and node",
                responses={200: {"model": OffloadOut}, **host.errors(403, 503, params=False)})  # fmt: skip
    def offload(
        p: Principal = host.principal, f: FabricAccess = host.fabrics,
        warn_at: Annotated[float, Query(gt=0, le=1, description="Warn when a table is this full.")] = 0.8,
    ) -> Response:
        p.require("audit", Verb.READ)
        b = f.backend(FABRIC)
        if b is None:
            raise UnavailableError("no dpu fabric is configured (fabrics.yaml)", field="fabrics.dpu")
        answer: Response = host.json(site_report(b, f.tenancy(), None, warn_at))
        return answer

    return router
