"""The API's limits on what one caller may cost the server before and after its token is
checked: the request body cap (a larger one for inventory import, for the roles that may
import), how many such large bodies are read and parsed at once, the per-principal write rate
(a token bucket), the per-principal cap on open event streams and their lifetime and polling
backoff. ``gpufabric serve`` sets them from its options; tests and benches build them.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from gpufabric.domain.auth import Principal
from gpufabric.domain.errors import ConfigError

MIB = 1024 * 1024


@dataclass(frozen=True)
class ApiLimits:
    """Every limit, with secure defaults; :meth:`check` names the first one out of range."""

    max_body: int = 1 * MIB  # bytes of any request body
    max_inventory_body: int = 64 * MIB  # bytes of POST /api/v1/inventory (a whole site's inventory), for importers
    large_bodies: int = 1  # inventory bodies past max_body read and parsed at once (~20x their size in memory)
    write_rate: float = 10.0  # writes per second per principal, refilled continuously (0: no limit)
    write_burst: int = 100  # writes a principal may make at once before the rate applies
    limit_admin: bool = False  # admins' writes are limited too (off: operators and benches run unthrottled)
    streams_per_principal: int = 8  # open event streams per principal
    stream_timeout: float = 1800.0  # seconds an event stream stays open at most
    stream_poll_min: float = 0.5  # seconds between a stream's first store polls (another process's worker)
    stream_poll_max: float = 5.0  # the polling backoff's ceiling

    def check(self) -> ApiLimits:
        bounds: tuple[tuple[str, float, float, float], ...] = (
            ("max_body", self.max_body, 1024, 1024 * MIB),
            ("max_inventory_body", self.max_inventory_body, 1024, 4096 * MIB),
            ("large_bodies", self.large_bodies, 1, 64),
            ("write_rate", self.write_rate, 0, 100_000),
            ("write_burst", self.write_burst, 1, 1_000_000),
            ("streams_per_principal", self.streams_per_principal, 1, 10_000),
            ("stream_timeout", self.stream_timeout, 1, 7 * 86400),
            ("stream_poll_min", self.stream_poll_min, 0.01, 60),
            ("stream_poll_max", self.stream_poll_max, self.stream_poll_min, 600),
        )
        for name, value, lo, hi in bounds:
            if not lo <= value <= hi or math.isnan(value):
                raise ConfigError(name, value, f"{lo:g}-{hi:g}")
        return self


class LimitExceeded(Exception):
    """A caller went over a limit: 413 (body) or 429 (rate, streams), one line naming it."""

    def __init__(self, status: int, field: str, value: object, allowed: str, message: str,
                 retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status, self.field, self.value, self.allowed, self.message = status, field, value, allowed, message
        self.retry_after = retry_after

    def body(self) -> dict[str, object]:
        code = "too_large" if self.status == 413 else "rate_limited"
        return {"error": {"code": code, "field": self.field, "value": self.value, "allowed": self.allowed,
                          "message": self.message}}

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}


def principal_key(p: Principal) -> str:
    """What the rate limit and the stream cap count per: the principal (role, tenant, name)."""
    return f"{p.role.value}:{p.tenant or ''}:{p.name}"


def human_bytes(n: int) -> str:
    return f"{n // MIB} MiB" if n % MIB == 0 else f"{n} bytes"


@dataclass
class WriteBuckets:
    """A token bucket per principal: ``take`` answers 0 (go) or the seconds until one write is due."""

    rate: float
    burst: int
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)  # key -> (tokens, at)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, key: str, now: float | None = None) -> float:
        if self.rate <= 0:
            return 0.0
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, at = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - at) * self.rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                if len(self._buckets) > 100_000:  # full buckets carry nothing: drop them
                    self._buckets = {k: v for k, v in self._buckets.items() if v[0] < self.burst - 1}
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate


@dataclass
class StreamSlots:
    """Open event streams per principal, at most ``cap`` each."""

    cap: int
    _open: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def acquire(self, key: str) -> bool:
        with self._lock:
            n = self._open.get(key, 0)
            if n >= self.cap:
                return False
            self._open[key] = n + 1
            return True

    def release(self, key: str) -> None:
        with self._lock:
            n = self._open.get(key, 0) - 1
            if n > 0:
                self._open[key] = n
            else:
                self._open.pop(key, None)

    def count(self, key: str) -> int:
        with self._lock:
            return self._open.get(key, 0)


@dataclass
class BodySlots:
    """At most ``cap`` large bodies read and parsed at once; the others wait their turn, their body
    unread (:meth:`hold`, on the server's event loop). ``running``/``waiting``: how many now."""

    cap: int
    running: int = 0
    waiting: int = 0
    _sem: asyncio.Semaphore | None = None

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        if self._sem is None:  # made on the loop that serves (one per server process)
            self._sem = asyncio.Semaphore(self.cap)
        self.waiting += 1
        try:
            await self._sem.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            self._sem.release()
