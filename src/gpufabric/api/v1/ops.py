"""v1 operations: the event log, API tokens (admin), the audit (run, last result as JSON
and HTML), the reconcile/worker loops' status (a fabric kind's own routes, e.g. ``/offload``, are mounted
from the kind: api/v1/kinds.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, Response

from gpufabric.api.deps import CTX, PAGE, PRINCIPAL, ApiContext, Page, json, paged
from gpufabric.api.v1.schemas import errors
from gpufabric.api.v1.schemas_ops import (
    AuditOut,
    EventPage,
    ReconcileOut,
    TokenCreated,
    TokenIn,
    TokenList,
    TokenOut,
)
from gpufabric.domain.auth import Principal, Verb
from gpufabric.domain.errors import NotFoundError

router = APIRouter()


@router.get("/events", tags=["events"], summary="The append-only event log (newest first)",
            responses={200: {"model": EventPage}, **errors(304)})
async def events(
    request: Request,
    p: Principal = PRINCIPAL,
    c: ApiContext = CTX,
    pg: Page = PAGE,
    action: Annotated[str | None, Query(max_length=63, pattern=r"^[a-z]+\.[a-z]+$")] = None,
    outcome: Literal["ok", "error"] | None = None,
) -> Response:
    return await c.cached(
        request, (p.role, p.tenant), lambda: paged(*c.reader.events(p, pg.limit, pg.offset, action, outcome), pg)
    )


@router.get("/tokens", tags=["tokens"], responses={200: {"model": TokenList}, **errors(403, params=False)})
def list_tokens(p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    p.require("token", Verb.READ)
    return json({"items": [t.to_dict() for t in c.tokens.list()]})


@router.post("/tokens", status_code=201, tags=["tokens"], summary="Create a token; its secret is shown once",
             responses={201: {"model": TokenCreated}, **errors(403, 404)})
def create_token(body: TokenIn, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    info, secret = c.actions.create_token(p, body.name, body.role, body.tenant, body.expires_at)
    return json({**info.to_dict(), "secret": secret}, 201)


@router.delete("/tokens/{token_id}", tags=["tokens"], summary="Revoke a token",
               responses={200: {"model": TokenOut}, **errors(403, 404)})
def revoke_token(
    token_id: Annotated[int, Path(ge=1, le=2**31 - 1)], p: Principal = PRINCIPAL, c: ApiContext = CTX
) -> Response:
    info = c.actions.revoke_token(p, token_id)
    c.forget_tokens()
    return json(info.to_dict())


@router.post("/audit", tags=["audit"], summary="Run the isolation audit on the fabrics' real state now",
             responses={200: {"model": AuditOut}, **errors(403, 503, params=False)})
def run_audit(p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    p.require("audit", Verb.ACT)
    from gpufabric.engine.audit_run import audit

    report = audit(c.need_engine())
    c.set_audit(report)
    c.actions.record(p, "audit.run", "fabrics", True, f"{len(report.violations)} violation(s)")
    return json(c.last_audit)


@router.get("/audit", tags=["audit"], summary="The last audit result (JSON)",
            responses={200: {"model": AuditOut}, **errors(403, 404, params=False)})
def last_audit(p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    p.require("audit", Verb.READ)
    if c.last_audit is None:
        raise NotFoundError("audit", "last")
    return json(c.last_audit)


@router.get("/audit/html", tags=["audit"], summary="The last audit result (self-contained HTML)",
            responses={200: {"content": {"text/html": {"schema": {"type": "string"}}}}, **errors(403, 404, params=False)})
def last_audit_html(p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    p.require("audit", Verb.READ)
    if not c.last_audit_html:
        raise NotFoundError("audit", "last")
    return HTMLResponse(c.last_audit_html)


@router.get("/reconcile", tags=["reconcile"], summary="The serve loops: passes, errors, last success, last result",
            responses={200: {"model": ReconcileOut}, **errors(403, params=False)})
def reconcile_status(p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    p.require("reconcile", Verb.READ)
    return json({"loops": [s.to_dict() for s in c.loops.states.values()], "last": c.last_reconcile})
