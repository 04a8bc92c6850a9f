"""What every v1 endpoint shares: the server context, the caller's principal (Bearer token),
paging, the one error shape, and pre-serialised JSON answers cached per store revision with
ETags (``If-None-Match`` -> 304)."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from fastapi import Depends, Query, Request, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from gpufabric.api.limits import ApiLimits, BodySlots, StreamSlots, WriteBuckets
from gpufabric.domain.auth import Principal
from gpufabric.domain.errors import (
    ConflictError,
    ExhaustedError,
    FabricError,
    ForbiddenError,
    GpufabricError,
    NotFoundError,
    QuotaError,
    UnauthorizedError,
    UnavailableError,
    ValidationError,
)
from gpufabric.domain.quotas import Quotas
from gpufabric.domain.segments import SegmentConfig
from gpufabric.runtime.loops import Loops
from gpufabric.store.auth import Tokens
from gpufabric.store.core import Store
from gpufabric.store.queries import Reader
from gpufabric.workflow.actions import Actions

STATUS: tuple[tuple[type[GpufabricError], int], ...] = (
    (UnauthorizedError, 401),
    (ForbiddenError, 403),
    (NotFoundError, 404),
    (ConflictError, 409),
    (ExhaustedError, 409),
    (QuotaError, 429),
    (ValidationError, 422),
    (UnavailableError, 503),
    (FabricError, 502),
)
REVISION_TTL = 0.05  # seconds the store revision is trusted before it is read again (own writes reset it)
AUTH_TTL = 2.0  # seconds a checked token is trusted before it is looked up again (revocation delay)
CACHE_TTL = 1.0  # seconds a cached answer lives even if the revision did not move (leases end by time)


def status_of(e: GpufabricError) -> int:
    return next((c for t, c in STATUS if isinstance(e, t)), 500)


def error_body(e: GpufabricError) -> dict[str, Any]:
    return e.to_json()  # the one error shape (domain/errors.py), the CLI's --json too


@dataclass
class ApiContext:
    """Everything the endpoints use, built once by ``gpufabric serve`` (or a test)."""

    store: Store
    segment_config: Callable[[], SegmentConfig]
    engine: Callable[[], Any] | None = None  # a MoveEngine over the configured fabrics (None: no fabrics)
    loops: Loops = field(default_factory=Loops)
    metrics: Callable[[], str] = lambda: ""
    quota_config: Callable[[], Quotas] = Quotas
    limits: ApiLimits = field(default_factory=ApiLimits)
    view_kinds: Callable[[], Sequence[Any] | None] = lambda: None  # the nodes' fabric columns (None: every kind)
    network_kinds: Callable[[], Sequence[Any] | None] = lambda: None  # the instances a new network spans
    fabrics_settings: Callable[[], Mapping[str, Any]] = dict  # fabrics.yaml's mapping (kinds' import formats)
    reader: Reader = field(init=False)
    write_buckets: WriteBuckets = field(init=False)
    stream_slots: StreamSlots = field(init=False)
    body_slots: BodySlots = field(init=False)
    actions: Actions = field(init=False)
    tokens: Tokens = field(init=False)
    _auth: dict[str, tuple[float, Principal]] = field(default_factory=dict)
    _cache: dict[tuple[Any, ...], tuple[int, float, bytes, str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    last_audit: dict[str, Any] | None = None
    last_audit_html: str = ""
    last_reconcile: dict[str, Any] | None = None
    _listeners: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.reader = Reader(self.store)
        self.actions = Actions(self.store, self.segment_config, self.changed, self.quota_config, self.network_kinds)
        self.tokens = Tokens(self.store)
        self.configure(self.limits)

    def configure(self, limits: ApiLimits) -> None:
        """Set the limits (checked); the write buckets, stream counts and body slots start afresh."""
        self.limits = limits.check()
        self.write_buckets = WriteBuckets(limits.write_rate, limits.write_burst)
        self.stream_slots = StreamSlots(limits.streams_per_principal)
        self.body_slots = BodySlots(limits.large_bodies)

    converge_requested: bool = False
    _rev: tuple[float, int] = (0.0, -1)

    def changed(self, what: str) -> None:
        self._rev = (0.0, -1)  # this process wrote: read the revision again
        if what == "write":
            return
        self.loops.wake("worker")
        if what == "converge":
            self.converge_requested = True

    def ring(self) -> None:
        """A move of this process's worker made progress: wake every event stream now (from
        any thread). Streams also poll the store, backed off from ``limits.stream_poll_min`` to
        ``stream_poll_max`` s, for other processes' workers."""
        with self._lock:
            listeners = list(self._listeners)
        for loop, ev in listeners:
            loop.call_soon_threadsafe(ev.set)

    def listen(self, ev: asyncio.Event) -> None:
        with self._lock:
            self._listeners.add((asyncio.get_running_loop(), ev))

    def unlisten(self, ev: asyncio.Event) -> None:
        with self._lock:
            self._listeners = {x for x in self._listeners if x[1] is not ev}

    def revision(self) -> int:
        now = time.monotonic()
        at, rev = self._rev
        if now - at < REVISION_TTL:
            return rev
        rev = self.reader.revision()
        self._rev = (now, rev)
        return rev

    def set_audit(self, report: Any) -> None:
        """Keep ``report`` (an AuditReport) as the last audit result (JSON and HTML)."""
        from gpufabric.audit import render_html

        self.last_audit = {"at": datetime.now(UTC).isoformat(), "report": report.to_dict()}
        self.last_audit_html = render_html(report)

    def cached_principal(self, secret: str) -> Principal | None:
        hit = self._auth.get(secret)
        return hit[1] if hit is not None and hit[0] > time.monotonic() else None

    def principal(self, secret: str | None) -> Principal:
        """The principal of ``secret``, trusted for AUTH_TTL s (never past the token's expiry)."""
        now = time.monotonic()
        if secret:
            hit = self.cached_principal(secret)
            if hit is not None:
                return hit
        p, expires_at = self.tokens.check(secret)
        assert secret is not None
        until = now + AUTH_TTL
        if expires_at is not None:
            until = min(until, now + (expires_at - datetime.now(UTC)).total_seconds())
        with self._lock:
            if len(self._auth) > 10_000:
                self._auth.clear()
            self._auth[secret] = (until, p)
        return p

    def forget_tokens(self) -> None:
        with self._lock:
            self._auth.clear()

    def need_engine(self) -> Any:
        if self.engine is None:
            raise UnavailableError("no fabrics are configured (fabrics.yaml): this call needs them", field="fabrics")
        return self.engine()

    def _hit(self, key: tuple[Any, ...]) -> tuple[int, tuple[bytes, str] | None]:
        rev = self.revision()
        hit = self._cache.get(key)
        if hit is not None and hit[0] == rev and time.monotonic() - hit[1] < CACHE_TTL:
            return rev, (hit[2], hit[3])
        return rev, None

    def _build(self, key: tuple[Any, ...], rev: int, build: Callable[[], Any]) -> tuple[bytes, str]:
        body = orjson.dumps(build())
        etag = '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'
        with self._lock:
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[key] = (rev, time.monotonic(), body, etag)
        return body, etag

    async def cached(self, request: Request, scope: tuple[Any, ...], build: Callable[[], Any]) -> Response:
        """The JSON of ``build()``, built at most once per store revision (and per second) for
        this URL and visibility ``scope`` (off the event loop); 304 when the client's ETag matches."""
        key = (request.url.path, str(request.url.query), scope)
        rev, hit = self._hit(key) if time.monotonic() - self._rev[0] < REVISION_TTL else await run_in_threadpool(
            self._hit, key
        )
        body, etag = hit if hit is not None else await run_in_threadpool(self._build, key, rev, build)
        headers = {"ETag": etag, "Cache-Control": "private, no-cache"}
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/json", headers=headers)


async def ctx(request: Request) -> ApiContext:
    c: ApiContext = request.app.state.ctx
    return c


BEARER = HTTPBearer(auto_error=False, description="A token from `gpufabric token create`")


async def principal(request: Request, _doc: HTTPAuthorizationCredentials | None = Security(BEARER)) -> Principal:
    checked: Principal | None = request.scope.get("state", {}).get("principal")  # by the guard, before the body
    if checked is not None:
        return checked
    auth = request.headers.get("authorization", "")
    scheme, _, secret = auth.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise UnauthorizedError("missing bearer token (Authorization: Bearer <token>)")
    c: ApiContext = request.app.state.ctx
    hit = c.cached_principal(secret.strip())
    if hit is not None:
        return hit
    return await run_in_threadpool(c.principal, secret.strip())


def json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


@dataclass(frozen=True)
class Page:
    limit: int
    offset: int


async def page(
    limit: int = Query(100, ge=1, le=1000, description="At most this many items."),
    offset: int = Query(0, ge=0, le=1_000_000, description="Skip this many items."),
) -> Page:
    return Page(limit, offset)


def paged(items: list[dict[str, Any]], total: int, pg: Page) -> dict[str, Any]:
    return {"items": items, "total": total, "limit": pg.limit, "offset": pg.offset}


PRINCIPAL = Depends(principal)
CTX = Depends(ctx)
PAGE = Depends(page)
