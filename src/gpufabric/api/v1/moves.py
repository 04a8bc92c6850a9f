"""v1 moves: create (202, run by the serve worker), list, show with phases/progress/timings,
a server-sent event stream of its progress (capped per principal, ending at a timeout, woken by
this server's worker and otherwise polling with backoff), and the dry-run preview."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from gpufabric.api.deps import CTX, PAGE, PRINCIPAL, ApiContext, Page, json, paged
from gpufabric.api.limits import LimitExceeded, principal_key
from gpufabric.api.v1.kind_fields import body_terms
from gpufabric.api.v1.schemas import (
    NAME_PATTERN,
    MoveDetail,
    MoveIn,
    MoveList,
    MoveOut,
    MovePage,
    MovesIn,
    PreviewIn,
    PreviewOut,
    errors,
    networks_arg,
)
from gpufabric.domain.auth import Principal, Verb
from gpufabric.domain.errors import NotFoundError
from gpufabric.domain.models import QUARANTINE
from gpufabric.domain.move_json import FINISHED, move_detail

router = APIRouter(tags=["moves"])
MoveId = Annotated[int, Path(ge=1, le=2**31 - 1)]
NameQ = Annotated[str | None, Query(max_length=63, pattern=NAME_PATTERN)]


def detail(c: ApiContext, p: Principal, move_id: int) -> dict[str, Any]:
    events, row = c.reader.move_progress(p, move_id)
    if row is None:
        raise NotFoundError("move", str(move_id))
    return move_detail(row, events)  # the one move shape (the CLI's too)


@router.get("/moves", responses={200: {"model": MovePage}, **errors(304)})
async def list_moves(
    request: Request,
    p: Principal = PRINCIPAL,
    c: ApiContext = CTX,
    pg: Page = PAGE,
    node: NameQ = None,
    tenant: NameQ = None,
    state: Literal["pending", "running", "failed", "done", "offered", "cancelled"] | None = None,
) -> Response:
    return await c.cached(
        request, (p.role, p.tenant), lambda: paged(*c.reader.moves(p, pg.limit, pg.offset, node, state, tenant), pg)
    )


@router.post(
    "/moves",
    status_code=202,
    summary="Request a move (old tenant -> quarantine -> new tenant); returned at once, run by the worker",
    responses={202: {"model": MoveOut}, **errors(403, 404, 409)},
)
def create_move(body: MoveIn, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    move = c.actions.request_move(p, body.node, body.to_tenant, networks_arg(body.networks), body.offering, body_terms(body))
    assert move.id is not None
    return json(c.reader.move(p, move.id), 202)


@router.post(
    "/moves/batch",
    status_code=202,
    summary="Request moves of several nodes at once (all or none, one transaction); run by the worker as one batch",
    responses={202: {"model": MoveList}, **errors(403, 404, 409)},
)
def create_moves(body: MovesIn, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    moves = c.actions.request_moves(p, body.nodes, body.to_tenant, networks_arg(body.networks), body.offering, body_terms(body))
    return json({"items": [c.reader.move(p, m.id) for m in moves if m.id is not None]}, 202)


@router.get(
    "/moves/{move_id}",
    summary="A move with its phases, progress and timings",
    responses={200: {"model": MoveDetail}, **errors(404)},
)
def show_move(move_id: MoveId, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    return json(detail(c, p, move_id))


@router.post(
    "/moves/{move_id}/cancel",
    summary="Cancel a pending (or scheduled) or failed move (admin); a running one is refused (409)",
    description="Never started: cancelled, its node stays in its tenant. Started (failed, or requeued after a "
    "failure): its node returns to quarantine, the lease active now ends. Recorded in the event log.",
    responses={200: {"model": MoveOut}, **errors(403, 404, 409)},
)
def cancel_move(move_id: MoveId, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    move = c.actions.cancel_move(p, move_id)
    assert move.id is not None
    return json(c.reader.move(p, move.id))


@router.get(
    "/moves/{move_id}/events",
    summary="Server-sent events: the move's progress as it happens (event: progress | move), until done or "
    "failed, or `event: timeout` after the server's stream timeout (reconnect to go on)",
    responses={200: {"content": {"text/event-stream": {}}, "description": "SSE stream"}, **errors(404, 429)},
)
def move_events(move_id: MoveId, request: Request, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> StreamingResponse:
    detail(c, p, move_id)  # 404 before the stream starts
    key = principal_key(p)
    if not c.stream_slots.acquire(key):
        cap = c.limits.streams_per_principal
        raise LimitExceeded(
            429, "streams_per_principal", cap, f"at most {cap} open event streams per principal",
            f"too many open event streams: at most {cap} per principal (streams_per_principal); close one first",
            retry_after=max(1, round(c.limits.stream_poll_max)),
        )
    return _Stream(_progress(c, p, move_id, request), lambda: c.stream_slots.release(key))


class _Stream(StreamingResponse):
    """An event stream that gives its principal's slot back however it ends (even unstarted)."""

    def __init__(self, content: AsyncIterator[bytes], release: Callable[[], None]) -> None:
        super().__init__(content, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


async def _progress(c: ApiContext, p: Principal, move_id: int, request: Request) -> AsyncIterator[bytes]:
    """The move's new progress events and state changes, read when this server's worker rings
    (at once) or at a poll for other processes' workers that backs off from ``stream_poll_min``
    to ``stream_poll_max`` s while nothing changes; ends when the move does or at ``stream_timeout``."""
    lim = c.limits
    loop = asyncio.get_running_loop()
    deadline = loop.time() + lim.stream_timeout
    last = 0
    state: tuple[str, str] | None = None
    wait = lim.stream_poll_min
    bell = asyncio.Event()  # rung by this server's worker as it records progress
    c.listen(bell)
    try:
        while True:
            bell.clear()  # before reading: progress recorded during the read rings again
            changed = False
            events, m = await asyncio.to_thread(c.reader.move_progress, p, move_id, last)  # one read a wake
            if m is None:  # no longer visible to the caller (a node's owner changed): the stream ends
                return
            for e in events:
                last, changed = e["id"], True
                yield b"event: progress\ndata: " + orjson.dumps(e) + b"\n\n"
            if (m["phase"], m["status"]) != state:
                state, changed = (m["phase"], m["status"]), True
                yield b"event: move\ndata: " + orjson.dumps(m) + b"\n\n"
            if m["status"] in FINISHED or await request.is_disconnected():
                return
            left = deadline - loop.time()
            if left <= 0:
                out = {"move": move_id, "timeout_s": lim.stream_timeout, "status": m["status"]}
                yield b"event: timeout\ndata: " + orjson.dumps(out) + b"\n\n"
                return
            wait = lim.stream_poll_min if changed else min(wait * 2, lim.stream_poll_max)
            with contextlib.suppress(TimeoutError):  # another process's worker: poll, backed off
                await asyncio.wait_for(bell.wait(), min(wait, left))
    finally:
        c.unlisten(bell)


@router.post(
    "/moves/preview",
    summary="The plans a move would apply per phase (dry run; changes nothing)",
    responses={200: {"model": PreviewOut}, **errors(403, 404, 503)},
)
def preview(body: PreviewIn, p: Principal = PRINCIPAL, c: ApiContext = CTX) -> Response:
    c.actions.node_visible(p, body.node)
    p.require("move", Verb.CREATE)
    engine = c.need_engine()
    nets = networks_arg(body.networks)
    if nets is None:  # as a move request: every network of the tenant (the caller is an admin here)
        nets = () if body.to_tenant == QUARANTINE else tuple(n.name for n in c.store.networks(body.to_tenant))
    plans = engine.preview(body.node, body.to_tenant, nets, terms=body_terms(body), offering=body.offering)
    return json({"phases": {k: v.to_dict() for k, v in plans.items()}, "lines": {k: v.lines() for k, v in plans.items()}})
