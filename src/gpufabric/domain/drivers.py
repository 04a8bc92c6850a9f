"""The driver contracts: one small ABC per fabric kind.

Drivers live in ``gpufabric.fabrics.<fabric>``, import only ``gpufabric.domain``, and
are registered under the ``gpufabric.drivers`` entry-point group. ``observe`` reads the
real device; ``apply`` does all of a batch's I/O in one transaction/session per device
and raises (never swallows) on failure.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from gpufabric.domain.state import EthernetPortConfig, IbFabricState, PartitionLayout, PkeyTable, SwitchState


class EthernetSwitchDriver(ABC):
    """One Ethernet switch (OVS bridge, vendor switch over SSH, ...)."""

    kind: str = "ethernet"

    @property
    @abstractmethod
    def switch(self) -> str:
        """The switch name used in the inventory."""

    @abstractmethod
    def observe(self) -> SwitchState:
        """Read every port's VLAN configuration from the device."""

    @abstractmethod
    def apply(self, changes: Sequence[EthernetPortConfig]) -> None:
        """Set each listed port to the given configuration in one transaction/session."""


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
