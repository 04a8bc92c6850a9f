"""The Ethernet kind's driver contract: one switch (OVS bridge, vendor switch over SSH, ...).

Drivers import only ``gpufabric.domain`` and this package, and are registered under the
``gpufabric.drivers`` entry-point group. ``observe`` reads the real device; ``apply`` does all
of a batch's I/O in one transaction/session per device and raises (never swallows) on failure."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from gpufabric.fabrics.ethernet.state import EthernetPortConfig, SwitchState


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
