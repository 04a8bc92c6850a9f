"""The DPU facts the kind reads now (mode, firmware, power cycle pending) through the
configured ``dpu.mst`` reader: ``gpufabric offload facts`` and the kind's reaction to
``gpufabric node power-cycled`` (:meth:`DpuKind.power_cycled`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from gpufabric.domain.errors import ConfigError, ConflictError, NotFoundError, ValidationError
from gpufabric.domain.fabric import FabricBackend
from gpufabric.domain.models import Node
from gpufabric.fabrics.dpu.entries.info import NEEDS, dpu_inventory, node_dpu
from gpufabric.fabrics.dpu.readers.dpumode import DpuFacts

if TYPE_CHECKING:
    from gpufabric.domain.hooks import PowerCycled
    from gpufabric.domain.views import FabricAccess


def facts_of(backend: FabricBackend[Any] | None, nodes: Iterable[Node], names: Sequence[str]) -> list[DpuFacts]:
    """The facts of ``names``' DPUs (every DPU when empty), read now through ``dpu.mst``."""
    reader = getattr(backend, "mst", None)
    if reader is None:
        raise ConfigError("dpu.mst", None, "a dpu.mst section in fabrics.yaml (how to read DPU mode and firmware)")
    known = tuple(nodes)
    inv = dpu_inventory(known)
    names_known = {n.name for n in known}
    for n in names:
        if n not in names_known:
            raise NotFoundError("node", n)
        if n not in inv:
            raise ValidationError("node", n, NEEDS)
    return [reader.read(inv[n]) for n in (names or sorted(inv))]


def power_cycled(instance: str, node: Node, fabrics: FabricAccess) -> PowerCycled | None:
    """An operator power-cycled ``node``'s host and DPU: its facts, read again (None: it has no
    DPU). ConflictError while the DPU still reports a pending change (the power cycle did not
    happen or was warm)."""
    from gpufabric.domain.hooks import PowerCycled  # (not on `offload facts`, nor on --help)

    if node_dpu(node) is None:
        return None
    f = facts_of(fabrics.backend(instance), fabrics.tenancy().nodes, [node.name])[0]
    if f.error:
        raise ConflictError(f"{node.name}: DPU mode and firmware could not be read ({f.error})", node=node.name)
    if f.power_cycle_pending:
        keys = ", ".join(f"{k} {c} -> {n}" for k, c, n in f.pending)
        raise ConflictError(f"{node.name}: DPU still reports a pending change ({keys}): power-cycle host and DPU "
                            "(a warm reboot is not enough)", node=node.name, pending=keys)  # fmt: skip
    return PowerCycled(f"DPU in {f.mode} mode, firmware {f.firmware or '?'}, no change pending", f.to_dict())
