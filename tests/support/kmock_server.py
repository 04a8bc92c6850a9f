"""A local Kubernetes API stand-in for tests: ``kmock``'s apiserver emulator served on
loopback in a background thread, with an official ``kubernetes`` client pointed at it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import kmock
from kubernetes import client


@contextmanager
def kmock_apiserver(timeout: float = 10.0) -> Iterator[str]:
    """Yields the emulator's base URL; stops it on exit."""
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def serve() -> None:
        async with kmock.KubernetesEmulator() as em, kmock.Server(em) as srv:
            box["url"] = str(srv.url).rstrip("/")
            ready.set()
            while not box.get("stop"):
                await asyncio.sleep(0.02)

    t = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    t.start()
    if not ready.wait(timeout):
        raise RuntimeError("kmock apiserver did not start")
    try:
        yield box["url"]
    finally:
        box["stop"] = True
        t.join(timeout)


def core_api(url: str) -> client.CoreV1Api:
    cfg = client.Configuration()
    cfg.host = url
    return client.CoreV1Api(client.ApiClient(cfg))
