"""The OpenShift (OVN-Kubernetes) offering's own lifecycle around a move, and the DPU gates.

Before a batch's quarantine (``DpuBackend.before_move``), in order, before any fabric change:

1. **gates**: every move into an offering whose role is ``dpu-host`` reads its DPU's mode and
   firmware (:mod:`..drivers.host.mst`) and is refused unless the DPU runs in embedded/restricted mode, has no
   power cycle pending and meets the offering's ``dpu_min_firmware`` (:func:`dpumode.gate`);
   without a ``dpu.mst`` reader such a move is refused unless ``dpu.mst: {verify: false}`` says
   explicitly to skip the gate;
2. **drain**: every node leaving a Kubernetes role (``dpu-host`` or ``full``) is cordoned and
   drained through the Eviction API (:mod:`..drivers.k8s.drain`). A drain that does not finish uncordons every
   node this batch cordoned and refuses the batch, naming the pods: the node stays in its tenant.

After join (``after_join``): a node joining a Kubernetes role gets the labels
``gpufabric.io/tenant=<tenant>`` and ``gpufabric.io/offering=<offering>`` and is uncordoned (its
DPU-host taint is part of the desired state, :mod:`..plan.profiles`); a node leaving one loses those
labels and stays cordoned (in quarantine nothing is scheduled on it).

Infra DaemonSets that must run on DPU hosts need :data:`INFRA_TOLERATIONS`
(``gpufabric offload tolerations``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from gpufabric.domain.errors import ConfigError, GpufabricError
from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import QUARANTINE
from gpufabric.domain.moves import Move
from gpufabric.fabrics.dpu.drivers.host.mst import MstReader
from gpufabric.fabrics.dpu.drivers.k8s.drain import Drainer
from gpufabric.fabrics.dpu.entries.info import dpu_inventory
from gpufabric.fabrics.dpu.plan.profiles import DPU_HOST_TAINT, offering_role
from gpufabric.fabrics.dpu.readers.dpumode import gate

TENANT_LABEL: Final = "gpufabric.io/tenant"
OFFERING_LABEL: Final = "gpufabric.io/offering"
K8S_ROLES: Final = frozenset({"dpu-host", "full"})
INFRA_TOLERATIONS: Final[tuple[dict[str, str], ...]] = (
    {"key": DPU_HOST_TAINT.key, "operator": "Exists", "effect": DPU_HOST_TAINT.effect},
)
"""Tolerations an infra DaemonSet (DNS, network checks, monitoring agents) needs to run on a
``dpu-host`` node: the DPU-host taint keeps every other pod off it (seed 002)."""


def check_gates(tenancy: Tenancy, moves: Sequence[Move], reader: MstReader | None, enforce: bool = True) -> None:
    """``reader`` None: refused unless the gate was explicitly turned off (``enforce`` False,
    ``dpu.mst: {verify: false}``)."""
    inv = dpu_inventory(tenancy.nodes)
    for m in moves:
        info = inv.get(m.node)
        off = tenancy.offerings.get(m.offering)
        if info is None or m.to_tenant == QUARANTINE or off is None or offering_role(off) != "dpu-host":
            continue
        if reader is None:
            if enforce:
                raise ConfigError("dpu.mst", None, f"a DPU mode/firmware reader (offering {m.offering} needs dpu mode on "
                                  f"{m.node}), or `mst: {{verify: false}}` to skip the gate")  # fmt: skip
            continue
        gate(reader.read(info), m.offering, dict(off.settings))


def drain_leaving(tenancy: Tenancy, moves: Sequence[Move], drainer: Drainer | None) -> list[str]:
    """Cordon and drain every node of ``moves`` that leaves a Kubernetes role; the nodes drained."""
    if drainer is None:
        return []
    inv = dpu_inventory(tenancy.nodes)
    leaving = sorted({m.node for m in moves if m.node in inv and offering_role(tenancy.offering(m.node)) in K8S_ROLES})
    cordoned: list[str] = []
    try:
        for node in leaving:
            was = drainer.is_cordoned(node)
            if not drainer.set_schedulable(node, False):
                continue  # not a registered Kubernetes node: nothing runs there
            if not was:
                cordoned.append(node)
            drainer.drain(node)
    except GpufabricError:
        for node in cordoned:  # the batch is refused: leave the nodes as they were
            drainer.set_schedulable(node, True)
        raise
    return leaving


def join(tenancy: Tenancy, moves: Sequence[Move], drainer: Drainer | None) -> None:
    if drainer is None:
        return
    inv = dpu_inventory(tenancy.nodes)
    for m in moves:
        if m.node not in inv:
            continue
        lease = tenancy.owners.get(m.node)
        if lease is not None and offering_role(tenancy.offering(m.node)) in K8S_ROLES:
            if drainer.set_schedulable(m.node, True):
                drainer.label(m.node, {TENANT_LABEL: lease.tenant, OFFERING_LABEL: lease.offering})
        elif drainer.is_cordoned(m.node):
            drainer.label(m.node, {TENANT_LABEL: None, OFFERING_LABEL: None})


def tolerations() -> list[dict[str, Any]]:
    return [dict(t) for t in INFRA_TOLERATIONS]
