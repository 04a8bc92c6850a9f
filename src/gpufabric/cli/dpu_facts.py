"""The DPU facts a command reads (mode, firmware, power cycle pending) through the configured
``dpu.mst`` reader: ``gpufabric offload facts`` and ``gpufabric node power-cycled``."""

from __future__ import annotations

from gpufabric.cli.common import fabrics_path, open_store, segment_config
from gpufabric.domain.errors import ConflictError
from gpufabric.fabrics.dpu.cli_view import facts_of
from gpufabric.fabrics.dpu.dpumode import DpuFacts


def read_facts(names: list[str]) -> list[DpuFacts]:
    """The facts of ``names``' DPUs (every DPU when empty), read now."""
    from gpufabric.engine.fabrics import Fabrics
    from gpufabric.store.registry import Registry

    fabrics = Fabrics.load(fabrics_path(), Registry.from_entry_points(), segment_config().quarantine_vlan.value)
    try:
        return facts_of(fabrics.backends.get("dpu"), open_store().nodes(), names)
    finally:
        fabrics.close()


def power_cycled(node: str) -> DpuFacts:
    """An operator power-cycled ``node``'s host and DPU: its facts, read again. ConflictError
    while the DPU still reports a pending change (the power cycle did not happen or was warm)."""
    f = read_facts([node])[0]
    if f.error:
        raise ConflictError(f"{node}: DPU mode and firmware could not be read ({f.error})", node=node)
    if f.power_cycle_pending:
        keys = ", ".join(f"{k} {c} -> {n}" for k, c, n in f.pending)
        raise ConflictError(f"{node}: DPU still reports a pending change ({keys}): power-cycle host and DPU "
                            "(a warm reboot is not enough)", node=node, pending=keys)  # fmt: skip
    return f
