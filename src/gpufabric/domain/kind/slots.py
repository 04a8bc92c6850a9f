"""The slots facet of a fabric kind (issue 33, :mod:`gpufabric.domain.slots`): what a kind says
when a slot of a shared host is carved — which GPUs a slot of ``k`` GPUs gets (the kind that knows
the board's partitions chooses) and whether the kind can give a slot of those GPUs its resources
(e.g. a rail HCA for each GPU). Pure: both read the host's inventory entries only."""

from __future__ import annotations

from collections.abc import Collection

from gpufabric.domain.kind.identity import KindIdentity
from gpufabric.domain.models import Node


class KindSlots(KindIdentity):
    """Carving a shared host into slots."""

    def slot_modules(self, host: Node, k: int, taken: Collection[int]) -> frozenset[int] | None:
        """The GPU module ids a new slot of ``k`` GPUs of ``host`` gets, disjoint from ``taken``
        (the GPUs of its other live slots), or None when this kind does not choose (the first kind
        that answers decides; the NVLink kind answers with a partition of the board's table). Raises
        ``ValidationError`` naming ``gpus`` and what is free when nothing fits. Default: None."""
        return None

    def check_slot(self, host: Node, modules: frozenset[int]) -> None:
        """Refuse (``ValidationError`` naming the field) a slot of ``host`` holding GPU modules ``modules`` that
        this kind cannot isolate, e.g. a GPU without a rail HCA in the inventory. Default: accept."""
        return None
