"""kmock's apiserver emulator with the pod Eviction subresource and a request log, on loopback.

``POST /api/v1/namespaces/NS/pods/NAME/eviction`` deletes the pod (201) unless a scripted
refusal applies. kmock cannot enforce PodDisruptionBudgets (it stores objects as plain JSON, no
controllers): a PDB's refusals are **scripted** instead — ``refuse[ns/name] = n`` answers the next
``n`` evictions of that pod with 429 (``-1``: always), the status a real apiserver returns when a
PodDisruptionBudget forbids the eviction. Every request is logged as (METHOD, path, subresource)
in order, so a test can check what happened before what."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp.web
import kmock
from kubernetes import client


@dataclass
class EvictBox:
    url: str = ""
    log: list[tuple[str, str, str]] = field(default_factory=list)
    refuse: dict[str, int] = field(default_factory=dict)

    def evictions(self) -> list[str]:
        return [p for m, p, s in self.log if m == "POST" and s == "eviction"]


class EvictingEmulator(kmock.KubernetesEmulator):  # type: ignore[misc]
    box: EvictBox

    async def _handle(self, request: Any) -> aiohttp.web.StreamResponse:
        box = self.box
        box.log.append((str(request.method.value if hasattr(request.method, "value") else request.method),
                        request.url.path, request.subresource or ""))  # fmt: skip
        if request.subresource == "eviction" and request.resource is not None:
            ref = f"{request.namespace}/{request.name}"
            left = box.refuse.get(ref, 0)
            if left:
                box.refuse[ref] = left - 1 if left > 0 else left
                return aiohttp.web.json_response(
                    {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429, "reason": "TooManyRequests",
                     "message": "Cannot evict pod as it would violate the pod's disruption budget."},
                    status=429,
                )  # fmt: skip
            key = (request.resource, request.namespace, request.name)
            async with self._lock:
                if key not in self._objects or self._objects[key].deleted:
                    return aiohttp.web.json_response({"kind": "Status", "code": 404, "reason": "NotFound"}, status=404)
                raw = self._objects[key].raw
                self._objects[key].delete()
                await self._buses[request.resource].put({"type": "DELETED", "object": raw})
            return aiohttp.web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201},
                                             status=201)  # fmt: skip
        return await super()._handle(request)  # type: ignore[no-any-return]


@contextmanager
def kmock_evicting(timeout: float = 10.0) -> Iterator[EvictBox]:
    box = EvictBox()
    ready = threading.Event()
    state: dict[str, bool] = {}

    async def serve() -> None:
        em = EvictingEmulator()
        em.box = box
        async with em, kmock.Server(em) as srv:
            box.url = str(srv.url).rstrip("/")
            ready.set()
            while not state.get("stop"):
                await asyncio.sleep(0.02)

    t = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    t.start()
    if not ready.wait(timeout):
        raise RuntimeError("kmock apiserver did not start")
    try:
        yield box
    finally:
        state["stop"] = True
        t.join(timeout)


def api_of(url: str) -> client.CoreV1Api:
    cfg = client.Configuration()
    cfg.host = url
    return client.CoreV1Api(client.ApiClient(cfg))


def make_pod(api: client.CoreV1Api, ns: str, name: str, node: str, daemonset: bool = False) -> None:
    owners = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "infra", "uid": "u-1", "controller": True}]
    try:
        api.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    except client.exceptions.ApiException:
        pass
    api.create_namespaced_pod(ns, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, **({"ownerReferences": owners} if daemonset else {})},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause"}]},
        "status": {"phase": "Running"},
    })  # fmt: skip
