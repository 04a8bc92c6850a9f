"""The HTTP server that ``gpufabric serve`` runs: REST API v1 under ``/api/v1`` (OpenAPI at
``/openapi.json``), ``/healthz``, ``/readyz``, ``/metrics`` and the web dashboard at ``/``.

Every v1 call carries a principal (``Authorization: Bearer <token>``): 401 without one, 404
for objects it may not see, 403 for verbs its role lacks. Every error is one JSON shape,
``{"error": {code, field, value, allowed, message}}``, mapped from the domain error tree.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException

from gpufabric.api import dashboard
from gpufabric.api.deps import ApiContext, error_body, status_of
from gpufabric.api.v1 import leases, moves, nodes, ops, tenants
from gpufabric.api.v1.schemas import Health
from gpufabric.domain.errors import GpufabricError

_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed"}


def _allowed(app: FastAPI, path: str) -> str:
    """The methods the schema documents for ``path`` (for 405's ``Allow``)."""
    table: list[tuple[re.Pattern[str], set[str]]] | None = getattr(app.state, "allow_table", None)
    if table is None:
        table = [
            (re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(tpl)) + "$"), {m.upper() for m in ops})
            for tpl, ops in app.openapi()["paths"].items()
        ]
        app.state.allow_table = table
    methods = set().union(*(ms for rx, ms in table if rx.match(path)))
    return ", ".join(sorted(methods))


def create_app(c: ApiContext) -> FastAPI:
    app = FastAPI(
        title="gpufabric",
        version="1.0.0",
        description="Lease GPU nodes to tenants, isolated on Ethernet, InfiniBand, NVLink and DPU fabrics. "
        "Authenticate with `Authorization: Bearer <token>` (`gpufabric token create`).",
    )
    app.state.ctx = c

    @app.exception_handler(GpufabricError)
    async def _domain(_r: Request, e: GpufabricError) -> JSONResponse:
        code = status_of(e)
        headers = {"WWW-Authenticate": "Bearer"} if code == 401 else None
        return JSONResponse(error_body(e), status_code=code, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_r: Request, e: RequestValidationError) -> JSONResponse:
        first: dict[str, Any] = e.errors()[0] if e.errors() else {}
        loc = ".".join(str(x) for x in first.get("loc", ()) if x not in ("body", "query", "path"))
        value = first.get("input")
        text = value if isinstance(value, (int, float, bool)) or value is None else str(value)[:200]
        body = {
            "error": {
                "code": "invalid",
                "field": loc or None,
                "value": text,
                "allowed": first.get("msg", ""),
                "message": f"invalid {loc or 'request'}: {first.get('msg', '')}",
            }
        }
        return JSONResponse(body, status_code=422)

    @app.exception_handler(HTTPException)
    async def _http(r: Request, e: HTTPException) -> JSONResponse:
        if e.status_code == 400:  # a body that is not JSON at all: the same answer as any invalid field
            body = {"error": {"code": "invalid", "field": "body", "value": None, "allowed": "a JSON document",
                              "message": f"invalid body: {e.detail}"}}
            return JSONResponse(body, status_code=422)
        headers = dict(e.headers or {})
        if e.status_code == 405:
            headers["Allow"] = _allowed(app, r.url.path)
        body = {
            "error": {
                "code": _CODES.get(e.status_code, "error"),
                "field": None,
                "value": r.method if e.status_code == 405 else r.url.path,
                "allowed": headers.get("Allow"),
                "message": str(e.detail),
            }
        }
        return JSONResponse(body, status_code=e.status_code, headers=headers)

    for r in (nodes.router, tenants.router, leases.router, moves.router, ops.router):
        app.include_router(r, prefix="/api/v1")

    @app.get("/healthz", tags=["health"], summary="The process is up", response_model=Health)
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "checks": {}}

    @app.get("/readyz", tags=["health"], summary="The store answers and every loop is alive",
             response_model=Health, responses={503: {"model": Health}})
    def readyz() -> Any:
        checks: dict[str, Any] = {}
        try:
            checks["store_revision"] = c.reader.revision()
            ok = True
        except Exception as e:  # the store is down: not ready, say why
            checks["store"] = f"{type(e).__name__}: {str(e)[:200]}"
            ok = False
        for name, st in c.loops.states.items():
            checks[name] = st.to_dict()
            ok = ok and st.alive
        return JSONResponse({"status": "ok" if ok else "unavailable", "checks": checks}, status_code=200 if ok else 503)

    @app.get("/metrics", response_class=PlainTextResponse, tags=["health"], summary="Prometheus metrics")
    def prom() -> str:
        return c.metrics()

    dashboard.mount(app)
    return app
