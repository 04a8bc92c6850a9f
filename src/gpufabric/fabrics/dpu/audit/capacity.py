"""The offload-table capacity of a DPU/SmartNIC model, each figure with its source (pure).

NVIDIA does not publish one "offload table size" per BlueField/ConnectX model and firmware:
the eSwitch's capacity depends on the steering mode, the match fields and the firmware. So
gpufabric ships **no built-in figure**: a capacity is known only when the operator states it,
with where it comes from, and an unknown model is reported as unknown (no ratio, no alert),
never guessed.

Sources, in order:

* ``dpu.capacity`` in fabrics.yaml::

      capacity:
        BlueField-2: {entries: 1000000, source: "vendor support case 1234, fw 24.40"}

* ``offload report --capacity MODEL=N`` (source: ``operator (--capacity)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpufabric.domain.errors import ConfigError

CLI_SOURCE = "operator (--capacity)"
MAX_ENTRIES = 1 << 32


@dataclass(frozen=True)
class Capacity:
    """How many entries a NIC model's offload table holds, and who says so."""

    entries: int
    source: str


def parse_capacity(raw: Any, where: str = "dpu.capacity") -> dict[str, Capacity]:
    """``{MODEL: {entries: N, source: TEXT}}`` from fabrics.yaml (ConfigError naming the key)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(where, raw, "a mapping NIC model -> {entries, source}")
    out: dict[str, Capacity] = {}
    for model, entry in raw.items():
        at = f"{where}.{model}"
        if not isinstance(entry, Mapping) or set(entry) - {"entries", "source"}:
            raise ConfigError(at, entry, "a mapping with entries and source only")
        n = entry.get("entries")
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_ENTRIES:
            raise ConfigError(f"{at}.entries", n, f"an integer 1-{MAX_ENTRIES}")
        src = entry.get("source")
        if not isinstance(src, str) or not src.strip():
            raise ConfigError(f"{at}.source", src, "where the figure comes from (a document, a case, a measurement)")
        out[str(model)] = Capacity(n, src.strip())
    return out


def merged(configured: Mapping[str, Capacity], given: Mapping[str, int | Capacity] | None) -> dict[str, Capacity]:
    """``configured`` overridden by figures given on the command line (plain ints are the CLI's)."""
    out = dict(configured)
    for model, v in (given or {}).items():
        out[model] = v if isinstance(v, Capacity) else Capacity(int(v), CLI_SOURCE)
    return out
