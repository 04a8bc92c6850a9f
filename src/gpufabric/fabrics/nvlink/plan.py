"""The NVLink plan (pure): the partition (de)activations between desired and observed
(:class:`PartitionChange`, :class:`NvlinkPlan`) and the partition allocator: a request for
``k`` GPUs of one node gets exactly one supported partition of size ``k``, disjoint from the
node's other active partitions and from GPUs that cannot be handed out, preferring the choice
that keeps larger partitions free.

Preference, in order: a partition in ``prefer`` (the one already active for this request:
stability); then the candidate that leaves the most free partitions of the largest size, then
of the next size down, and so on; then the lowest id. A request nothing matches is refused
with a ValidationError naming ``gpus`` and listing what is possible now.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.fabric import FabricPlan
from gpufabric.fabrics.nvlink.segments import Partition, sizes
from gpufabric.fabrics.nvlink.state import FABRIC, NodeFm, NodeWant, SlotWant


def free_partitions(
    partitions: Sequence[Partition],
    busy: Collection[int],
    unavailable: Collection[int] = (),
    unsupported: Collection[int] = (),
) -> tuple[Partition, ...]:
    """Partitions that could be activated now: no GPU busy or unavailable, not unsupported."""
    blocked = set(busy) | set(unavailable)
    return tuple(p for p in partitions if p.id not in unsupported and not (p.gpus & blocked))


def keep_free_score(partitions: Sequence[Partition], free: Sequence[Partition], taken: Partition) -> tuple[int, ...]:
    """How many partitions of each size larger than ``taken`` stay free once it is taken,
    largest size first (compared lexicographically: more is better)."""
    larger = [s for s in sorted(sizes(partitions), reverse=True) if s > taken.size]
    left = [p for p in free if not (p.gpus & taken.gpus)]
    return tuple(sum(1 for p in left if p.size == s) for s in larger)


def allocate(
    partitions: Sequence[Partition],
    k: int,
    *,
    busy: Collection[int] = (),
    unavailable: Collection[int] = (),
    unsupported: Collection[int] = (),
    prefer: Collection[int] = (),
    where: str = "",
) -> Partition:
    """The partition for a request of ``k`` GPUs.

    ``busy``: module ids in the node's *other* active partitions; ``unavailable``: module ids
    that must not be handed out (unhealthy, not in the inventory); ``unsupported``: partition
    ids FM cannot activate; ``prefer``: partition ids already active for this request;
    ``where`` prefixes the refusal's reason (e.g. the node)."""
    at = f"{where}: " if where else ""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValidationError("gpus", k, possible(partitions, busy, unavailable, unsupported), f"{at}not a positive count")
    got = _choose(tuple(partitions), k, frozenset(busy), frozenset(unavailable), frozenset(unsupported), frozenset(prefer))
    if got is None:
        reason = (
            f"no partition of {k} GPUs exists"
            if k not in sizes(partitions)
            else f"every partition of {k} GPUs overlaps an active partition or an unavailable GPU"
        )
        raise ValidationError("gpus", k, possible(partitions, busy, unavailable, unsupported), at + reason)
    return got


@lru_cache(maxsize=4096)
def _choose(
    partitions: tuple[Partition, ...],
    k: int,
    busy: frozenset[int],
    unavailable: frozenset[int],
    unsupported: frozenset[int],
    prefer: frozenset[int],
) -> Partition | None:
    """The choice itself (pure, memoized: thousands of nodes share a handful of situations)."""
    free = free_partitions(partitions, busy, unavailable, unsupported)
    candidates = [p for p in free if p.size == k]
    if not candidates:
        return None
    kept = [p for p in candidates if p.id in prefer]
    if kept:
        return min(kept)
    return min(candidates, key=lambda p: (tuple(-n for n in keep_free_score(partitions, free, p)), p.id))


def possible(
    partitions: Sequence[Partition],
    busy: Collection[int] = (),
    unavailable: Collection[int] = (),
    unsupported: Collection[int] = (),
) -> str:
    """What a request could get now, e.g. ``"1 or 2 GPUs (free: 4 [2,4], 8 [2], ...)"``."""
    free = free_partitions(partitions, busy, unavailable, unsupported)
    if not free:
        return "nothing: no partition is free on this node"
    counts = " or ".join(str(s) for s in sizes(free))
    return f"{counts} GPUs (free partitions: {', '.join(str(p) for p in free)})"


def assign(want: NodeWant, fm: NodeFm | None) -> Partition | None:
    """The partition a node's want gets against what its FM reports (None in quarantine).

    The node has one owner, so its own active partitions are not "busy": one of them that
    fits (right size, healthy, supported) is kept; otherwise the allocator picks afresh.
    GPUs not in the inventory and unhealthy GPUs are never handed out. Raises ValidationError
    (field ``gpus``) when nothing fits."""
    if want.gpus == 0:
        return None
    partitions = fm.partitions if fm is not None and fm.partitions else want.partitions
    every = frozenset().union(*(p.gpus for p in partitions)) if partitions else frozenset()
    unavailable = set(every - want.module_ids) if want.module_ids else set()
    unsupported: frozenset[int] = frozenset()
    prefer: frozenset[int] = frozenset()
    if fm is not None:
        unavailable |= fm.unhealthy()
        unsupported, prefer = fm.unsupported, fm.active
    return allocate(
        partitions, want.gpus, unavailable=unavailable, unsupported=unsupported, prefer=prefer, where=f"node {want.node}"
    )


def slot_partition(partitions: Sequence[Partition], modules: Collection[int]) -> Partition | None:
    """The partition of exactly GPUs ``modules`` (a slot's), None when the table has none."""
    mine = frozenset(modules)
    return next((p for p in partitions if p.gpus == mine), None)


def slot_targets(want: NodeWant, fm: NodeFm | None) -> tuple[tuple[SlotWant, Partition | None], ...]:
    """Each live slot of a shared host with the partition it holds: exactly its GPUs, supported
    by FM, of GPUs in the inventory (None otherwise: the audit reports it and its GPUs stay in
    no partition)."""
    partitions = fm.partitions if fm is not None and fm.partitions else want.partitions
    unsupported = fm.unsupported if fm is not None else frozenset()
    out: list[tuple[SlotWant, Partition | None]] = []
    for s in want.live_slots():
        p = slot_partition(partitions, s.modules)
        ok = p is not None and p.id not in unsupported and (not want.module_ids or s.modules <= want.module_ids)
        out.append((s, p if ok else None))
    return tuple(out)


def targets(want: NodeWant, fm: NodeFm | None) -> tuple[tuple[Partition, str], ...]:
    """The partitions a node's FM should have active, with the tenant of each: on a shared
    host one per live slot (disjoint: the allocator keeps slots so; of two live slots that
    overlap, one whose partition is active now keeps it, else the first by name, and the other
    gets none), else the one :func:`assign` gives the node's lease (none in quarantine). Raises
    ValidationError as :func:`assign` does."""
    if not want.shared:
        p = assign(want, fm)
        return ((p, want.tenant),) if p is not None else ()
    active = fm.active if fm is not None else frozenset()
    chosen = [(s, p) for s, p in slot_targets(want, fm) if p is not None]
    out: list[tuple[Partition, str]] = []
    used: set[int] = set()
    for s, p in sorted(chosen, key=lambda sp: (sp[1].id not in active, sp[0].name)):
        if not (p.gpus & used):
            out.append((p, s.tenant))
            used |= p.gpus
    return tuple(sorted(out))


@dataclass(frozen=True, order=True)
class PartitionChange:
    node: str
    activate: bool
    partition: int
    gpus: tuple[int, ...] = ()
    tenant: str = ""
    slot: str = ""  # on a shared host: the slot whose GPUs the partition holds ("" none, or not shared)

    def line(self) -> str:
        what = "activate" if self.activate else "deactivate"
        whom = f" for {self.tenant}" if self.activate and self.tenant else ""
        where = f" (slot {self.slot})" if self.slot else ""
        gpus = ",".join(map(str, self.gpus))
        return f"nvlink {self.node}: {what} partition {self.partition} (GPUs {gpus}){whom}{where}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "node": self.node,
            "action": "activate" if self.activate else "deactivate",
            "partition": self.partition,
            "gpus": list(self.gpus),
            "tenant": self.tenant,
        }
        if self.slot:
            out["slot"] = self.slot
        return out


@dataclass(frozen=True)
class NvlinkPlan(FabricPlan):
    """Partition deactivations (removals) and activations (additions), per node."""

    fabric: ClassVar[str] = FABRIC
    changes: tuple[PartitionChange, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.changes

    def lines(self) -> list[str]:
        return [c.line() for c in self.ordered()]

    def ordered(self) -> tuple[PartitionChange, ...]:
        """Deactivations first (by node, id), then activations."""
        return tuple(sorted(self.changes, key=lambda c: (c.activate, c.node, c.partition)))

    def to_dict(self) -> Any:
        return [c.to_dict() for c in self.ordered()]

    def split(self) -> tuple[NvlinkPlan, NvlinkPlan]:
        return (
            NvlinkPlan(tuple(c for c in self.ordered() if not c.activate)),
            NvlinkPlan(tuple(c for c in self.ordered() if c.activate)),
        )

    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted({c.node for c in self.changes}))
