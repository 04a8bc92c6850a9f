"""The NVLink fabric's audit invariants (pure): an active partition holds GPUs of one tenant
only, a leased GPU is only in its tenant's partition, no unhealthy GPU is leased; on a shared
host (issue 33) every active partition is exactly one live slot's GPUs, no two active
partitions share a GPU and no GPU of a slot in quarantine (or of no slot) is in one.

Fabric Manager keeps no tenant labels, so a GPU's owner is derived: a node has one owner (its
lease, or quarantine); the GPUs of the partition :func:`assign` gives that lease are the
tenant's, every other GPU of the node belongs to quarantine. On a shared host a GPU's owner is
its slot's (quarantine: no slot holds it, or its slot's lease is not live).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.fabric import InvariantSpec
from gpufabric.domain.findings import Violation
from gpufabric.domain.models import QUARANTINE
from gpufabric.domain.severity import Severity
from gpufabric.fabrics.nvlink.plan import assign, slot_targets
from gpufabric.fabrics.nvlink.segments import Partition
from gpufabric.fabrics.nvlink.state import FABRIC, NodeFm, NodeWant, NvlinkDesired, NvlinkState

SHARED: Final = "NVLINK-PARTITION-SHARED"
FOREIGN: Final = "NVLINK-FOREIGN"
UNHEALTHY: Final = "NVLINK-UNHEALTHY-LEASED"
SLOT: Final = "NVLINK-SLOT-PARTITION"
OVERLAP: Final = "NVLINK-PARTITION-OVERLAP"
IDLE: Final = "NVLINK-SLOT-QUARANTINE"

INVARIANTS: Final = (
    InvariantSpec(
        SHARED,
        Severity.CRITICAL.value,
        "An active NVLink partition holds GPUs of one tenant only: none of a GPU not leased to the node's "
        "tenant, none at all while the node is in quarantine.",
    ),
    InvariantSpec(
        FOREIGN,
        Severity.HIGH.value,
        "A leased GPU is active only in its tenant's partition (the one the allocator gives the lease).",
    ),
    InvariantSpec(
        UNHEALTHY,
        Severity.HIGH.value,
        "No GPU whose fabric state is not Completed/Success (or with failed NVLinks) is leased.",
    ),
    InvariantSpec(
        SLOT,
        Severity.HIGH.value,
        "On a shared host every active partition is exactly the GPUs of one live slot, and every live slot's "
        "GPUs are a partition FM can activate.",
    ),
    InvariantSpec(
        OVERLAP,
        Severity.CRITICAL.value,
        "No two active partitions of one node share a GPU.",
    ),
    InvariantSpec(
        IDLE,
        Severity.CRITICAL.value,
        "On a shared host no GPU of a slot in quarantine, nor of no slot, is in an active partition.",
    ),
)


def _v(inv: str, sev: Severity, msg: str, node: str, tenants: tuple[str, ...], resource: str) -> Violation:
    return Violation(inv, sev, msg, fabric=FABRIC, device="fabric-manager", node=node, tenants=tenants, resource=resource)


def _gpus(p: Partition) -> str:
    return p.gpu_list()


def overlaps(node: str, fm: NodeFm) -> Iterator[Violation]:
    """Two active partitions of ``node`` sharing a GPU (FM refuses it; a read can still show it)."""
    active = fm.active_partitions()
    for i, p in enumerate(active):
        for q in active[i + 1 :]:
            if both := p.gpus & q.gpus:
                yield _v(OVERLAP, Severity.CRITICAL, f"active partitions {p.id} and {q.id} on {node} share GPUs "
                         f"{','.join(map(str, sorted(both)))}", node, (), f"partition:{p.id}")  # fmt: skip


def audit_shared(want: NodeWant, fm: NodeFm) -> Iterator[Violation]:
    """A shared host: each active partition against the slots holding its GPUs, each live slot's partition."""
    node = want.node
    yield from overlaps(node, fm)
    active = fm.active_partitions()
    for p in active:
        owners = {g: want.slot_of(g) for g in sorted(p.gpus)}
        live = {s.name: s for s in owners.values() if s is not None and s.live}
        tenants = tuple(sorted({s.tenant for s in live.values()}))
        exact = len(live) == 1 and next(iter(live.values())).modules == p.gpus
        if not exact:
            yield _v(SLOT, Severity.HIGH, f"partition {p.id} (GPUs {_gpus(p)}) on {node} is active but is not the GPUs "
                     f"of one live slot (slots: {', '.join(sorted(live)) or 'none'})", node, tenants, f"partition:{p.id}")  # fmt: skip
        if len(tenants) > 1:
            yield _v(SHARED, Severity.CRITICAL, f"partition {p.id} (GPUs {_gpus(p)}) on {node} holds GPUs of tenants "
                     f"{', '.join(tenants)}", node, tenants, f"partition:{p.id}")  # fmt: skip
        idle = [g for g, s in owners.items() if s is None or not s.live]
        if idle:
            whose = sorted({s.name if s is not None else "no slot" for g in idle for s in (owners[g],)})
            yield _v(IDLE, Severity.CRITICAL, f"partition {p.id} (GPUs {_gpus(p)}) on {node} is active with GPUs "
                     f"{','.join(map(str, idle))} in quarantine ({', '.join(whose)})", node,
                     tuple(sorted({*tenants, QUARANTINE})), f"partition:{p.id}")  # fmt: skip
        for g in sorted(p.gpus):
            info, s = fm.gpu(g), owners[g]
            if info is not None and not info.healthy and s is not None and s.live:
                yield _v(UNHEALTHY, Severity.HIGH, f"GPU {g} of {node} is leased to {s.tenant} (slot {s.name}) in active "
                         f"partition {p.id} but {info.why_unhealthy()}", node, (s.tenant,), f"gpu:{g}")  # fmt: skip
    yield from slot_findings(want, fm)


def slot_findings(want: NodeWant, fm: NodeFm) -> Iterator[Violation]:
    """Live slots of a shared host that cannot get a partition: two sharing GPUs, or GPUs FM has no
    (supported) partition of."""
    node, slots = want.node, want.live_slots()
    for i, one in enumerate(slots):
        for other in slots[i + 1 :]:
            if both := one.modules & other.modules:
                yield _v(SLOT, Severity.HIGH, f"slots {one.name} ({one.tenant}) and {other.name} ({other.tenant}) on "
                         f"{node} share GPUs {','.join(map(str, sorted(both)))}: one of them gets no partition", node,
                         tuple(sorted({one.tenant, other.tenant})), f"slot:{other.name}")  # fmt: skip
    for slot, target in slot_targets(want, fm):
        if target is None:
            yield _v(SLOT, Severity.HIGH, f"slot {slot.name} of {slot.tenant} on {node} (GPUs "
                     f"{','.join(map(str, sorted(slot.modules)))}) has no partition FM can activate", node,
                     (slot.tenant,), f"slot:{slot.name}")  # fmt: skip


def audit_node(want: NodeWant, fm: NodeFm) -> Iterator[Violation]:
    if want.shared:
        yield from audit_shared(want, fm)
        return
    node, tenant = want.node, want.tenant
    active = fm.active_partitions()
    if want.gpus == 0:
        for p in active:
            yield _v(
                SHARED,
                Severity.CRITICAL,
                f"partition {p.id} (GPUs {_gpus(p)}) is active while {node} is in quarantine",
                node,
                (QUARANTINE,),
                f"partition:{p.id}",
            )
        return
    try:
        mine = assign(want, fm)
    except ValidationError:
        mine = None
    # the tenant's partition now: an active one of the lease's size (as it is, healthy or not),
    # else the one the allocator gives the lease
    current = min((p for p in active if p.size == want.gpus), default=None) or mine
    owned = current.gpus if current is not None else frozenset()
    if current is None:
        for g in sorted((want.module_ids or frozenset(m for p in fm.partitions for m in p.gpus)) & fm.unhealthy()):
            info = fm.gpu(g)
            yield _v(
                UNHEALTHY,
                Severity.HIGH,
                f"{node} is leased to {tenant} ({want.gpus} GPUs) but no healthy partition fits: GPU {g} "
                f"{info.why_unhealthy() if info else 'unhealthy'}",
                node,
                (tenant,),
                f"gpu:{g}",
            )
    for p in active:
        foreign = p.gpus - owned
        if foreign:
            tenants = (tenant, QUARANTINE) if p.gpus & owned else (QUARANTINE,)
            yield _v(
                SHARED,
                Severity.CRITICAL,
                f"partition {p.id} (GPUs {_gpus(p)}) on {node} holds GPUs {','.join(map(str, sorted(foreign)))} "
                f"not leased to {tenant}",
                node,
                tuple(sorted(tenants)),
                f"partition:{p.id}",
            )
        elif current is not None and p.id != current.id:
            yield _v(
                FOREIGN,
                Severity.HIGH,
                f"GPUs {_gpus(p)} of {tenant} on {node} are active in partition {p.id}, not in the tenant's "
                f"partition {current.id}",
                node,
                (tenant,),
                f"partition:{p.id}",
            )
        for g in sorted(p.gpus & owned):
            info = fm.gpu(g)
            if info is not None and not info.healthy:
                yield _v(
                    UNHEALTHY,
                    Severity.HIGH,
                    f"GPU {g} of {node} is leased to {tenant} in active partition {p.id} but {info.why_unhealthy()}",
                    node,
                    (tenant,),
                    f"gpu:{g}",
                )


def audit(desired: NvlinkDesired, observed: NvlinkState) -> Iterator[Violation]:
    """Every violation of the NVLink invariants, node by node (nodes not read are skipped)."""
    for node in sorted(desired.nodes):
        fm = observed.nodes.get(node)
        if fm is not None:
            yield from audit_node(desired.nodes[node], fm)
