"""The HTTP server that ``gpufabric serve`` runs: REST API v1 under ``/api/v1`` (OpenAPI at
``/openapi.json``), ``/healthz``, ``/readyz``, ``/metrics`` and the web dashboard at ``/``.

Every v1 call carries a principal (``Authorization: Bearer <token>``), checked by the guard
(``api/guard.py``) before the body is read: 401 without one, 404 for objects it may not see,
403 for verbs its role lacks, 413/429 past a limit (``api/limits.py``). Every error is one JSON
shape, ``{"error": {code, field, value, allowed, message}}``, mapped from the domain error tree.
``/healthz`` is open and says ok; ``/readyz`` says ok/unavailable per check to anyone and the
details (errors) to an admin; ``/metrics`` needs an admin token — or :func:`create_probe_app`
serves both openly on a separate listener (``gpufabric serve --probe-bind``).
"""

from __future__ import annotations

import re
import threading
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException

from gpufabric.api import bodies, dashboard, guard
from gpufabric.api.deps import PRINCIPAL, ApiContext, error_body, status_of
from gpufabric.api.limits import LimitExceeded
from gpufabric.api.v1 import kinds, leases, moves, nodes, ops, tenants
from gpufabric.api.v1.schemas import RETRY_AFTER, errors
from gpufabric.api.v1.schemas_ops import Health
from gpufabric.domain.auth import Principal, Role
from gpufabric.domain.errors import ForbiddenError, GpufabricError

_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
          413: "too_large", 429: "rate_limited"}


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
    guard.install(app, c)
    _document_limits(app)

    @app.exception_handler(LimitExceeded)
    async def _limit(_r: Request, e: LimitExceeded) -> JSONResponse:
        return JSONResponse(e.body(), status_code=e.status, headers=e.headers())

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
        if isinstance(text, str):  # a lone surrogate ("\ud800" in the JSON) is shown escaped, not a 500
            text = text.encode("utf-8", "backslashreplace").decode()
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

    for r in (nodes.router, tenants.router, leases.router, moves.router, ops.router, *kinds.routers()):
        app.include_router(r, prefix="/api/v1")

    @app.get("/healthz", tags=["health"], summary="The process is up (says nothing else)", response_model=Health)
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "checks": {}}

    @app.get("/readyz", tags=["health"], summary="The store answers and every loop is alive: ok/unavailable per "
             "check; with an admin token also each loop's errors", response_model=Health,
             responses={503: {"model": Health}, **errors(params=False)})
    async def readyz(request: Request) -> Any:
        secret = guard.bearer(request.scope["headers"])
        detailed = secret is not None and (await guard.authenticate(c, secret)).role is Role.ADMIN
        return await run_in_threadpool(readiness, c, detailed)

    @app.get("/metrics", tags=["health"],
             summary="Prometheus metrics (an admin token; or open on the --probe-bind listener)",
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "Metrics"},
                        **errors(403, params=False)})
    def prom(p: Principal = PRINCIPAL) -> PlainTextResponse:
        if p.role is not Role.ADMIN:
            raise ForbiddenError(f"role {p.role.value} may not read metrics", field="role", value=p.role.value,
                                 allowed="admin")
        return PlainTextResponse(c.metrics())

    dashboard.mount(app)
    return app


def readiness(c: ApiContext, detailed: bool) -> JSONResponse:
    """``/readyz``: each check ok/unavailable; ``detailed`` adds the store error and each loop's
    state (its last error names switches, users and managers: admins only)."""
    checks: dict[str, Any] = {}
    try:
        rev = c.reader.revision()
        checks["store"] = {"ok": True, "revision": rev} if detailed else "ok"
        ok = True
    except Exception as e:  # the store is down: not ready (why: admins only)
        checks["store"] = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:200]}"} if detailed else "unavailable"
        ok = False
    for name, st in c.loops.states.items():
        checks[name] = st.to_dict() if detailed else ("ok" if st.alive else "unavailable")
        ok = ok and st.alive
    return JSONResponse({"status": "ok" if ok else "unavailable", "checks": checks}, status_code=200 if ok else 503)


def create_probe_app(c: ApiContext) -> FastAPI:
    """``/metrics`` and the detailed ``/readyz`` without a token, for a listener of their own
    (``gpufabric serve --probe-bind``, loopback only) that only Prometheus and probes reach."""
    app = FastAPI(title="gpufabric probes", openapi_url=None, docs_url=None, redoc_url=None)

    @app.get("/readyz")
    def readyz() -> JSONResponse:
        return readiness(c, True)

    @app.get("/metrics", response_class=PlainTextResponse)
    def prom() -> str:
        return c.metrics()

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "checks": {}}

    return app


def _document_limits(app: FastAPI) -> None:
    """Every v1 operation may answer 413 (body cap) and every write 429 (rate limit): add both to
    the generated schema once, with the request bodies' models (:func:`bodies.add_schemas`)."""
    build = app.openapi
    lock = threading.Lock()  # `gpufabric serve` warms it in a thread while requests may come in

    def openapi() -> dict[str, Any]:
        with lock:
            return app.openapi_schema if app.openapi_schema is not None else _with_limits(build())

    def _with_limits(spec: dict[str, Any]) -> dict[str, Any]:
        bodies.add_schemas(spec)  # the request bodies endpoints parse themselves
        ref = {"$ref": "#/components/schemas/Error"}
        for path, methods in spec["paths"].items():
            if not path.startswith(guard.API):
                continue
            for method, op in methods.items():
                answers = op.setdefault("responses", {})
                answers.setdefault("413", {"description": "The request body is larger than the server's cap",
                                           "content": {"application/json": {"schema": ref}}})
                if method.upper() in guard.WRITES:
                    answers.setdefault("429", {"description": "Over the principal's write rate (see Retry-After)",
                                               "headers": RETRY_AFTER,
                                               "content": {"application/json": {"schema": ref}}})
        app.openapi_schema = spec
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
