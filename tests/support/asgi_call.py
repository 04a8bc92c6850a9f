"""Calling an ASGI app as a server would, the body arriving in chunks the test counts: how many
the app read before it answered (a body refused before it is read reads none)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any


def asgi_call(app: Any, method: str, path: str, headers: dict[str, str], chunks: Sequence[bytes]) -> tuple[int, bytes, int]:
    """(status, body, chunks read) of ``method path`` with the body in ``chunks``; a client that
    has nothing more to send waits (the app answering anyway is what a refusal looks like)."""
    read = [0]
    out: dict[str, Any] = {"body": b""}

    async def receive() -> dict[str, Any]:
        if read[0] >= len(chunks):
            await asyncio.sleep(3600)  # a client that sends nothing more
        read[0] += 1
        return {"type": "http.request", "body": chunks[read[0] - 1], "more_body": read[0] < len(chunks)}

    async def send(m: dict[str, Any]) -> None:
        if m["type"] == "http.response.start":
            out["status"] = m["status"]
        elif m["type"] == "http.response.body":
            out["body"] += m.get("body", b"")

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "path": path,
             "raw_path": path.encode(), "query_string": b"", "root_path": "", "scheme": "http",
             "server": ("testserver", 80), "client": ("127.0.0.1", 1234),
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}  # fmt: skip
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 30))
    return out["status"], out["body"], read[0]
