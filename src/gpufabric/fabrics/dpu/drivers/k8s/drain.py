"""``Drainer``: cordon a Kubernetes node, drain it through the Eviction API, uncordon it (I/O,
official ``kubernetes`` client, the same API object as :mod:`.nodes`).

Drain, as ``kubectl drain --ignore-daemonsets`` does it: every pod bound to the node
(``spec.nodeName``) except DaemonSet pods (they tolerate ``unschedulable`` and would come back),
mirror pods (static, ``kubernetes.io/config.mirror``) and finished pods (``Succeeded``/``Failed``)
is evicted with ``POST .../pods/NAME/eviction`` (policy/v1 ``Eviction``). A 429 is a
PodDisruptionBudget refusal: retried every ``retry_every`` seconds until ``timeout``; a 404 is a
pod already gone. Then the drain waits for the evicted pods to disappear. A drain that does not
finish by ``timeout`` raises :class:`DrainError` naming the pods left; the caller uncordons
(the node stays in its tenant)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from gpufabric.domain.errors import ConflictError, FabricError

UNSCHEDULABLE_TAINT: Final = "node.kubernetes.io/unschedulable"


class DrainError(ConflictError):
    """A node's pods could not all be evicted within the timeout."""


def _api_exception() -> Any:
    from kubernetes.client.exceptions import ApiException

    return ApiException


@dataclass(frozen=True)
class DrainResult:
    node: str
    evicted: tuple[str, ...]  # namespace/name
    kept: tuple[str, ...]  # DaemonSet / mirror / finished pods left on the node
    refusals: int  # 429s seen
    seconds: float


def _ref(pod: Any) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"


def _kept(pod: Any) -> bool:
    owners = pod.metadata.owner_references or []
    if any(o.kind == "DaemonSet" for o in owners):
        return True
    if "kubernetes.io/config.mirror" in (pod.metadata.annotations or {}):
        return True
    return bool(pod.status is not None and pod.status.phase in ("Succeeded", "Failed"))


class Drainer:
    def __init__(
        self, api: Any, timeout: float = 120.0, retry_every: float = 2.0,
        clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
    ) -> None:  # fmt: skip
        self.api, self.timeout, self.retry_every = api, timeout, retry_every
        self.clock, self.sleep = clock, sleep

    # ---- node
    def _node(self, node: str) -> Any | None:
        try:
            return self.api.read_node(node)
        except _api_exception() as e:
            if e.status == 404:
                return None
            raise FabricError(f"kubernetes: reading node {node}: {e.status} {e.reason}", fabric="dpu") from None

    def is_cordoned(self, node: str) -> bool:
        obj = self._node(node)
        return bool(obj is not None and obj.spec is not None and obj.spec.unschedulable)

    def set_schedulable(self, node: str, schedulable: bool) -> bool:
        """Cordon (False) or uncordon (True) ``node``; False when the node is not registered."""
        if self._node(node) is None:
            return False
        try:
            self.api.patch_node(node, {"spec": {"unschedulable": not schedulable}})
        except _api_exception() as e:
            raise FabricError(f"kubernetes: {'uncordon' if schedulable else 'cordon'} {node}: {e.status} {e.reason}",
                              fabric="dpu", device=node) from None  # fmt: skip
        return True

    def label(self, node: str, labels: dict[str, str | None]) -> None:
        try:
            self.api.patch_node(node, {"metadata": {"labels": labels}})
        except _api_exception() as e:
            raise FabricError(f"kubernetes: labelling {node}: {e.status} {e.reason}", fabric="dpu", device=node) from None

    # ---- pods
    def pods_on(self, node: str) -> list[Any]:
        try:
            pods = self.api.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
        except _api_exception() as e:
            if e.status == 404:  # kmock (the lab's stand-in) knows no pods resource before its first pod
                return []
            raise FabricError(f"kubernetes: listing pods of {node}: {e.status} {e.reason}", fabric="dpu") from None
        return [p for p in pods if p.spec is not None and p.spec.node_name == node]  # selector may be ignored

    def _evict(self, pod: Any) -> str:
        """'evicted', 'gone' or 'refused' (429)."""
        from kubernetes import client

        body = client.V1Eviction(metadata=client.V1ObjectMeta(name=pod.metadata.name, namespace=pod.metadata.namespace))
        try:
            self.api.create_namespaced_pod_eviction(pod.metadata.name, pod.metadata.namespace, body)
        except _api_exception() as e:
            if e.status == 429:
                return "refused"
            if e.status == 404:
                return "gone"
            raise FabricError(f"kubernetes: evicting {_ref(pod)}: {e.status} {e.reason}", fabric="dpu") from None
        return "evicted"

    def drain(self, node: str) -> DrainResult:
        """Evict every evictable pod of ``node`` (the node must be cordoned first)."""
        t0 = self.clock()
        pods = self.pods_on(node)
        kept = tuple(sorted(_ref(p) for p in pods if _kept(p)))
        todo = {_ref(p): p for p in pods if not _kept(p)}
        evicted: list[str] = []
        refusals = 0
        while todo:
            for ref, pod in sorted(todo.items()):
                outcome = self._evict(pod)
                if outcome == "refused":
                    refusals += 1
                    continue
                evicted.append(ref)
                del todo[ref]
            if not todo:
                break
            if self.clock() - t0 >= self.timeout:
                raise DrainError(
                    f"drain of {node} did not finish in {self.timeout:g}s: PodDisruptionBudget refused "
                    f"eviction of {', '.join(sorted(todo))}",
                    node=node, pods=sorted(todo), refusals=refusals,
                )  # fmt: skip
            self.sleep(self.retry_every)
        while True:  # wait for the evicted pods to leave
            left = sorted(r for r in (_ref(p) for p in self.pods_on(node)) if r in set(evicted))
            if not left:
                break
            if self.clock() - t0 >= self.timeout:
                raise DrainError(f"drain of {node} did not finish in {self.timeout:g}s: still terminating "
                                 f"{', '.join(left)}", node=node, pods=left, refusals=refusals)  # fmt: skip
            self.sleep(min(self.retry_every, 0.5))
        return DrainResult(node, tuple(evicted), kept, refusals, self.clock() - t0)
