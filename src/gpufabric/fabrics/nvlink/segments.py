"""Fabric Manager's predefined GPU partitions, as data keyed by baseboard: the NVLink kind's
segments (what isolates one tenant's GPUs from another's).

GPU ids are physical ids (``nvidia-smi -q`` "Module ID"), which do **not** follow PCI order.
The HGX H100/H200 8-GPU table is the default Shared NVSwitch partition table of NVIDIA's
Fabric Manager user guide (partition 0: all eight; 1-2: halves; 3-6: pairs 1,3 / 2,4 / 5,7 /
6,8; 7-14: single GPUs 1..8). A node's real table is what ``fmpm -l`` lists; these tables are
the fallback before a node is read, the stand-in's content, and the check of a lease's size.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from gpufabric.domain.errors import ConfigError

MAX_PARTITIONS: Final = 64  # FM_MAX_FABRIC_PARTITIONS
MAX_GPUS: Final = 16  # FM_MAX_NUM_GPUS per partition: also the most GPUs a lease may ask for (kind.GPUS)


@dataclass(frozen=True, order=True)
class Partition:
    """One predefined partition: its id and the physical (module) ids of its GPUs."""

    id: int
    gpus: frozenset[int]

    @property
    def size(self) -> int:
        return len(self.gpus)

    def gpu_list(self) -> str:
        return ",".join(str(g) for g in sorted(self.gpus))

    def __str__(self) -> str:
        return f"{self.id} [{self.gpu_list()}]"


# Baseboard -> partition id -> module ids. Add a baseboard by adding an entry (tests check each
# table: ids unique and < 64, module ids 1-16, every size's partitions disjoint).
_HGX_8GPU: Final[Mapping[int, tuple[int, ...]]] = {
    0: (1, 2, 3, 4, 5, 6, 7, 8),
    1: (1, 2, 3, 4),
    2: (5, 6, 7, 8),
    3: (1, 3),
    4: (2, 4),
    5: (5, 7),
    6: (6, 8),
    **{7 + i: (1 + i,) for i in range(8)},
}

TABLES: Final[Mapping[str, Mapping[int, tuple[int, ...]]]] = {
    "hgx-h100-8gpu": _HGX_8GPU,
    "hgx-h200-8gpu": _HGX_8GPU,
}

DEFAULT_BOARD: Final = "hgx-h100-8gpu"

# The PCI bus of each module id on one real HGX H100 box (bus 19 -> module 2, ...): the
# stand-in's default, so that anything assuming PCI order breaks in tests as it did on that box.
HGX_8GPU_PCI: Final[Mapping[int, str]] = {
    2: "00000000:19:00.0",
    4: "00000000:3B:00.0",
    1: "00000000:4C:00.0",
    3: "00000000:5D:00.0",
    7: "00000000:9B:00.0",
    5: "00000000:BB:00.0",
    6: "00000000:CB:00.0",
    8: "00000000:DB:00.0",
}


def table(board: str) -> tuple[Partition, ...]:
    """The partitions of ``board`` ordered by id (ConfigError naming the known boards)."""
    try:
        raw = TABLES[board]
    except KeyError:
        raise ConfigError("nvlink.baseboard", board, ", ".join(sorted(TABLES))) from None
    return tuple(Partition(pid, frozenset(gpus)) for pid, gpus in sorted(raw.items()))


def sizes(partitions: Iterable[Partition]) -> tuple[int, ...]:
    """The partition sizes a table offers, ascending."""
    return tuple(sorted({p.size for p in partitions}))
