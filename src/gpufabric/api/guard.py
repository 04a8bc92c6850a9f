"""The gate in front of every request (a pure ASGI middleware), in this order, each before any
byte of the body is read:

1. under ``/api/v1``: a valid Bearer token (401 otherwise; an unknown, revoked or expired token
   is refused the same way). The principal is kept in the request's state for the endpoints.
2. writes (POST, PUT, PATCH, DELETE) under ``/api/v1``: the principal's token bucket (429 with
   ``Retry-After`` naming the rate); admins are exempt unless ``limit_admin``.
3. an inventory import (``POST /api/v1/inventory`` and ``/inventory/{format}``): the principal's
   role may import (403 otherwise: a lessee's 64 MiB body is never read nor parsed).
4. every request: the body cap (``max_body``; ``max_inventory_body`` for an import): 413 at once
   when ``Content-Length`` says more, else the body is read as it streams and refused as soon as
   it passes the cap (it is then handed to the endpoint from memory). An import that may pass
   ``max_body`` (by its ``Content-Length``, or chunked) first waits for one of the ``large_bodies``
   slots (``ApiContext.body_slots``), held until it is answered: its body is read, then parsed by
   the endpoint off the event loop (:mod:`gpufabric.api.bodies`), a bounded number at once.
"""

from __future__ import annotations

import math
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any

from fastapi.concurrency import run_in_threadpool
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gpufabric.api.deps import ApiContext, error_body
from gpufabric.api.limits import LimitExceeded, human_bytes, principal_key
from gpufabric.domain.auth import Principal, Role, Verb
from gpufabric.domain.errors import ForbiddenError, UnauthorizedError

API = "/api/v1"
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
INVENTORY = API + "/inventory"


def bearer(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The Bearer secret of raw ASGI headers, or None when there is none."""
    for k, v in headers:
        if k == b"authorization":
            scheme, _, secret = v.decode("latin-1").partition(" ")
            return (secret.strip() or None) if scheme.lower() == "bearer" else None
    return None


async def authenticate(c: ApiContext, secret: str | None) -> Principal:
    if not secret:
        raise UnauthorizedError("missing bearer token (Authorization: Bearer <token>)")
    hit = c.cached_principal(secret)
    return hit if hit is not None else await run_in_threadpool(c.principal, secret)


class Guard:
    """Auth, write rate and body cap before the app reads a request (see the module doc)."""

    def __init__(self, app: ASGIApp, ctx: ApiContext) -> None:
        self.app = app
        self.ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        method: str = scope["method"]
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        limits = self.ctx.limits
        inventory = method == "POST" and (path == INVENTORY or path.startswith(INVENTORY + "/"))  # a file, a format
        try:
            if path == API or path.startswith(API + "/"):
                p = await authenticate(self.ctx, bearer(headers))
                scope.setdefault("state", {})["principal"] = p
                if inventory:
                    p.require("node", Verb.CREATE)  # before the body: only an importer sends a large one
                if method in WRITES and (p.role is not Role.ADMIN or limits.limit_admin):
                    wait = self.ctx.write_buckets.take(principal_key(p))
                    if wait > 0:
                        rate = f"{limits.write_rate:g} writes/s per principal (burst {limits.write_burst})"
                        raise LimitExceeded(
                            429, "write_rate", p.name, rate,
                            f"rate limit: at most {rate}; retry after {math.ceil(wait)} s",
                            retry_after=max(1, math.ceil(wait)),
                        )
        except UnauthorizedError as e:
            await JSONResponse(error_body(e), 401, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        except ForbiddenError as e:
            await JSONResponse(error_body(e), 403)(scope, receive, send)
            return
        except LimitExceeded as e:
            await JSONResponse(e.body(), e.status, headers=e.headers())(scope, receive, send)
            return
        cap, field = (limits.max_inventory_body, "max_inventory_body") if inventory else (limits.max_body, "max_body")
        length, has_body = _declared(headers)
        large = inventory and has_body and (length is None or length > limits.max_body)
        slot: AbstractAsyncContextManager[None] = self.ctx.body_slots.hold() if large else nullcontext()
        async with slot:
            try:
                receive = await self._capped(length, receive, cap, field) if has_body else receive
            except LimitExceeded as e:
                await JSONResponse(e.body(), e.status, headers=e.headers())(scope, receive, send)
                return
            await self.app(scope, receive, send)

    @staticmethod
    async def _capped(length: int | None, receive: Receive, cap: int, field: str) -> Receive:
        """The body (of ``length`` bytes if declared) read up to ``cap`` (413 past it, naming the
        limit ``field``), replayed to the app from memory."""

        def too_large(seen: int | str) -> LimitExceeded:
            return LimitExceeded(413, field, seen, f"at most {cap} bytes",
                                 f"request body too large: at most {human_bytes(cap)} ({cap} bytes, {field})")

        if length is not None and length > cap:
            raise too_large(length)
        messages: list[Message] = []
        seen = 0
        while True:
            m = await receive()
            if m["type"] != "http.request":  # the client went away: let the app see it
                messages.append(m)
                break
            seen += len(m.get("body", b""))
            if seen > cap:
                raise too_large(f"more than {cap}")
            messages.append(m)
            if not m.get("more_body", False):
                break
        body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")
        replay: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]
        replay += [m for m in messages if m["type"] != "http.request"]

        async def replayed() -> Message:
            return replay.pop(0) if replay else await receive()

        return replayed


def _declared(headers: list[tuple[bytes, bytes]]) -> tuple[int | None, bool]:
    """The body's ``Content-Length`` (None: not given, or not a number) and whether there is a
    body at all (a ``Content-Length`` or a chunked ``Transfer-Encoding``)."""
    length: int | None = None
    body = False
    for k, v in headers:
        if k == b"content-length":
            text = v.decode("latin-1").strip()
            length, body = (int(text) if text.isdigit() else None), True
        elif k == b"transfer-encoding" and b"chunked" in v.lower():
            body = True
    return length, body


def install(app: Any, ctx: ApiContext) -> None:
    app.add_middleware(Guard, ctx=ctx)
