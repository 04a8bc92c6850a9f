"""The NVLink fabric's audit invariants (pure): an active partition holds GPUs of one tenant
only, a leased GPU is only in its tenant's partition, no unhealthy GPU is leased.

Fabric Manager keeps no tenant labels, so a GPU's owner is derived: a node has one owner (its
lease, or quarantine); the GPUs of the partition :func:`assign` gives that lease are the
tenant's, every other GPU of the node belongs to quarantine.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.fabric import InvariantSpec
from gpufabric.domain.findings import Violation
from gpufabric.domain.models import QUARANTINE
from gpufabric.domain.severity import Severity
from gpufabric.fabrics.nvlink.plan import assign
from gpufabric.fabrics.nvlink.segments import Partition
from gpufabric.fabrics.nvlink.state import FABRIC, NodeFm, NodeWant, NvlinkDesired, NvlinkState

SHARED: Final = "NVLINK-PARTITION-SHARED"
FOREIGN: Final = "NVLINK-FOREIGN"
UNHEALTHY: Final = "NVLINK-UNHEALTHY-LEASED"

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
)


def _v(inv: str, sev: Severity, msg: str, node: str, tenants: tuple[str, ...], resource: str) -> Violation:
    return Violation(inv, sev, msg, fabric=FABRIC, device="fabric-manager", node=node, tenants=tenants, resource=resource)


def _gpus(p: Partition) -> str:
    return p.gpu_list()


def audit_node(want: NodeWant, fm: NodeFm) -> Iterator[Violation]:
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
