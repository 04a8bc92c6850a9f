"""The Ethernet kind's driver contract: one switch (OVS bridge, vendor switch over SSH, ...).

Drivers import only ``gpufabric.domain``, ``gpufabric.transport`` and the pure layers of this
package (readers, state), and are registered under the ``gpufabric.drivers`` entry-point group.
``observe`` reads the real device; ``apply`` does all of a batch's I/O in one
transaction/session per device and raises (never swallows) on failure.

Optional powers are declared, never guessed from a driver's class: a driver lists what it can
do beyond the contract in :attr:`EthernetSwitchDriver.capabilities` (``TRUNKS``: it reads every
trunk's allowed VLANs itself, :meth:`~EthernetSwitchDriver.trunks`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar, Final

from gpufabric.fabrics.ethernet.state import EthernetPortConfig, SwitchState
from gpufabric.transport.secrets import TransportNote

TRUNKS: Final = "trunks"  # reads each trunk port's allowed VLANs, uplinks its observe leaves out included


class EthernetSwitchDriver(ABC):
    """One Ethernet switch (OVS bridge, vendor switch over SSH, ...)."""

    kind: str = "ethernet"
    capabilities: ClassVar[frozenset[str]] = frozenset()  # the optional powers this driver has

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

    def describe(self) -> str:
        """How this driver reaches its switch, for the site check (default: the driver's class)."""
        return type(self).__name__

    def trunks(self) -> dict[str, frozenset[int] | None]:
        """``TRUNKS`` drivers: trunk port -> the VLANs it allows (None: every VLAN)."""
        raise NotImplementedError(f"{type(self).__name__} does not declare {TRUNKS!r}")

    def transport_notes(self) -> tuple[TransportNote, ...]:
        """What this driver's transport leaves unprotected (audit ``TRANSPORT-INSECURE``); default none."""
        return ()

    def close(self) -> None:
        """Release the connections this driver holds (default: none held)."""
        return None
