"""The NVLink fabric's typed values: what one node's Fabric Manager reports (observed) and what
the leases want (desired). The plan of partition (de)activations between them is :mod:`plan`'s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gpufabric.domain.models import QUARANTINE
from gpufabric.fabrics.nvlink.segments import Partition

FABRIC: Final = "nvlink"
HEALTHY_STATE: Final = "Completed"
HEALTHY_STATUS: Final = "Success"


@dataclass(frozen=True)
class GpuInfo:
    """One GPU of a node as FM (and optionally ``nvidia-smi -q``) reports it.

    ``state``/``status`` are the Fabric section of ``nvidia-smi -q`` ("" when not read);
    ``failed_ports`` come from ``fmpm --get-nvlink-failed-devices``."""

    module_id: int
    pci_bus_id: str = ""
    uuid: str = ""
    links_available: int = 0
    links_max: int = 0
    state: str = ""
    status: str = ""
    failed_ports: tuple[int, ...] = ()

    @property
    def healthy(self) -> bool:
        """Leasable: fabric State Completed and Status Success (when read), no failed NVLink
        port, and every NVLink FM knows of available. Unknown health counts as healthy only
        when nothing else says otherwise (FM alone does not report the Fabric section)."""
        if self.failed_ports:
            return False
        if self.links_max and self.links_available < self.links_max:
            return False
        if self.state or self.status:
            return self.state == HEALTHY_STATE and self.status == HEALTHY_STATUS
        return True

    def why_unhealthy(self) -> str:
        if self.failed_ports:
            return f"NVLink ports {','.join(map(str, self.failed_ports))} failed"
        if self.links_max and self.links_available < self.links_max:
            return f"{self.links_available}/{self.links_max} NVLinks available"
        return f"fabric state {self.state or '?'}/{self.status or '?'}"


@dataclass(frozen=True)
class NodeFm:
    """One node's Fabric Manager: its supported partitions, which are active, its GPUs."""

    node: str
    partitions: tuple[Partition, ...]
    active: frozenset[int] = frozenset()
    gpus: tuple[GpuInfo, ...] = ()
    unsupported: frozenset[int] = frozenset()

    def partition(self, pid: int) -> Partition | None:
        return next((p for p in self.partitions if p.id == pid), None)

    def active_partitions(self) -> tuple[Partition, ...]:
        return tuple(p for p in self.partitions if p.id in self.active)

    def unhealthy(self) -> frozenset[int]:
        return frozenset(g.module_id for g in self.gpus if not g.healthy)

    def gpu(self, module_id: int) -> GpuInfo | None:
        return next((g for g in self.gpus if g.module_id == module_id), None)

    def with_active(self, active: frozenset[int]) -> NodeFm:
        return NodeFm(self.node, self.partitions, active, self.gpus, self.unsupported)


@dataclass(frozen=True)
class NvlinkState:
    """The observed NVLink fabric: node -> its FM's view (nodes not read are absent)."""

    nodes: Mapping[str, NodeFm] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            n: {"active": sorted(fm.active), "unhealthy": sorted(fm.unhealthy())} for n, fm in sorted(self.nodes.items())
        }


@dataclass(frozen=True, order=True)
class SlotWant:
    """One slot of a shared host (issue 33): its node name, its owner now (quarantine: its lease
    is not live) and its GPU module ids, which are exactly one partition of the board's."""

    name: str
    tenant: str
    modules: frozenset[int]

    @property
    def live(self) -> bool:
        return self.tenant != QUARANTINE


@dataclass(frozen=True)
class NodeWant:
    """What the lease of one node wants: ``gpus`` GPUs (0 in quarantine) for ``tenant``.

    ``partitions`` is the baseboard table (used until FM's own list is read); ``module_ids``
    are the node's GPUs in the inventory (others are never handed out). On a shared host
    (``shared``) the host's own lease holds no partition (``gpus`` 0) and ``slots`` are its
    slots, whatever their owners: each live one wants the partition of exactly its GPUs."""

    node: str
    tenant: str
    gpus: int
    partitions: tuple[Partition, ...]
    module_ids: frozenset[int] = frozenset()
    shared: bool = False
    slots: tuple[SlotWant, ...] = ()

    def live_slots(self) -> tuple[SlotWant, ...]:
        return tuple(s for s in self.slots if s.live)

    def slot_of(self, module: int) -> SlotWant | None:
        """The slot holding GPU ``module`` (None: no slot does)."""
        return next((s for s in self.slots if module in s.modules), None)


@dataclass(frozen=True)
class NvlinkDesired:
    """Node -> its want. Deliberately no partition ids: the diff picks them against the
    observed state, keeping an active partition that still fits (stable, deterministic)."""

    nodes: Mapping[str, NodeWant] = field(default_factory=dict)
