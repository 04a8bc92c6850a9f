"""The InfiniBand kind's driver contract: a subnet's partition authority (OpenSM, UFM).

Drivers import only ``gpufabric.domain``, ``gpufabric.transport`` and this kind's lower layers
(never another driver's folder), and are registered under the ``gpufabric.drivers``
entry-point group. ``apply`` makes the subnet's partitions equal to a layout in one session
and raises (never swallows) on failure.

Optional powers are declared, not guessed from the class: a driver lists the names of
:data:`CAPABILITIES` it has in ``capabilities``, and the backend and the site check ask
``X in sm.capabilities`` before they use the accessor that name stands for."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Final, Protocol

from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.audit.places import Places
from gpufabric.fabrics.infiniband.audit.rogue import RoguePolicy, RogueReport
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import CaPort
from gpufabric.fabrics.infiniband.state import IbFabricState, PartitionLayout, PkeyTable

SMINFO: Final = "sminfo"
"""``observe`` reads the subnet's SMs by SMInfo (the site check holds them to ``trusted_sm_guids``)."""
DISCOVERY: Final = "discovery"
"""``ports()``: the CA ports discovered on the subnet, by port GUID."""
OPENSM_CONFIG: Final = "opensm_config"
"""``config`` holds OpenSM's files: ``partitions_conf``, ``ipoib``, ``sa_dump``, ``sm_hosts``."""
WATCH: Final = "watch"
"""``watcher(trusted)``: a cheap rogue-SM watch between the reconcile passes."""
CONTAIN: Final = "contain"
"""``contain_rogue(layout, policy, places)``: cut rogue SMs off and restore ``layout``."""
CAPABILITIES: Final = frozenset({SMINFO, DISCOVERY, OPENSM_CONFIG, WATCH, CONTAIN})


class SmWatcher(Protocol):
    """One watch over a subnet's SMs (:meth:`SubnetManagerDriver.watcher`)."""

    def check(self) -> Sequence[object]:
        """What looks like a rogue SM now (each printable); empty when nothing does."""
        ...


class SubnetManagerDriver(ABC):
    """An InfiniBand subnet's partition authority (OpenSM, UFM)."""

    kind: str = "infiniband"
    capabilities: frozenset[str] = frozenset()
    """The optional powers of :data:`CAPABILITIES` this driver has."""

    @abstractmethod
    def observe(self) -> IbFabricState:
        """Read PKey tables (by SMP where possible), SMs seen and settings."""

    @abstractmethod
    def apply(self, layout: PartitionLayout) -> Sequence[PkeyTable]:
        """Make the subnet's partitions equal to ``layout``, verify it by reading back, and
        return the read-back PKey tables of (at least) the ports whose tables changed."""

    def ports(self, refresh: bool = False) -> Mapping[Guid, CaPort]:
        """(:data:`DISCOVERY`) The CA ports on the subnet, by port GUID."""
        raise NotImplementedError(f"{type(self).__name__} has no {DISCOVERY}")

    def watcher(self, trusted: Sequence[Guid]) -> SmWatcher:
        """(:data:`WATCH`) A rogue-SM watch trusting the SM ports ``trusted``."""
        raise NotImplementedError(f"{type(self).__name__} has no {WATCH}")

    def contain_rogue(self, layout: PartitionLayout, policy: RoguePolicy, places: Places | None) -> RogueReport:
        """(:data:`CONTAIN`) Detect rogue SMs; with ``contain``, cut them off and restore ``layout``."""
        raise NotImplementedError(f"{type(self).__name__} has no {CONTAIN}")


def capabilities_of(sm: object) -> frozenset[str]:
    """The capabilities ``sm`` declares (none for an object outside the contract)."""
    caps: object = getattr(sm, "capabilities", frozenset())
    return caps if isinstance(caps, frozenset) else frozenset()
