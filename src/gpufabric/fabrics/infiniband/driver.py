"""The InfiniBand kind's driver contract: a subnet's partition authority (OpenSM, UFM).

Drivers import only ``gpufabric.domain`` and this package, and are registered under the
``gpufabric.drivers`` entry-point group. ``apply`` makes the subnet's partitions equal to a
layout in one session and raises (never swallows) on failure."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from gpufabric.fabrics.infiniband.state import IbFabricState, PartitionLayout, PkeyTable


class SubnetManagerDriver(ABC):
    """An InfiniBand subnet's partition authority (OpenSM, UFM)."""

    kind: str = "infiniband"

    @abstractmethod
    def observe(self) -> IbFabricState:
        """Read PKey tables (by SMP where possible), SMs seen and settings."""

    @abstractmethod
    def apply(self, layout: PartitionLayout) -> Sequence[PkeyTable]:
        """Make the subnet's partitions equal to ``layout``, verify it by reading back, and
        return the read-back PKey tables of (at least) the ports whose tables changed."""
