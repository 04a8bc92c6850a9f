"""The InfiniBand kind's state values: partitions and their layout (desired), PKey tables read by
SMP, the subnet managers seen and their files (observed). An InfiniBand instance's slice of a
:class:`~gpufabric.domain.state.FabricState` is an :class:`IbFabricState`."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from functools import cached_property

from gpufabric.domain.values import DEFAULT_PKEY, Guid, Membership, PKey


@dataclass(frozen=True, order=True)
class PartitionMember:
    guid: Guid
    membership: Membership = Membership.FULL


@dataclass(frozen=True)
class Partition:
    """One OpenSM/UFM partition: a PKey with its member port GUIDs."""

    name: str
    pkey: PKey
    members: tuple[PartitionMember, ...] = ()
    ipoib: bool = False
    qos: tuple[tuple[str, int], ...] = field(default=(), compare=False)
    """The partition's own IPoIB settings (``mtu``, ``rate``, ``sl``, ``scope``: its network's
    options), over the subnet's; rendered into the partition's flags, not read back from them."""

    def full_members(self) -> frozenset[Guid]:
        return frozenset(m.guid for m in self.members if m.membership is Membership.FULL)


@dataclass(frozen=True)
class PartitionLayout:
    """The whole desired partitioning of a subnet: tenant partitions plus the policy of
    the default partition (hosts limited, SM/trusted ports full)."""

    partitions: tuple[Partition, ...] = ()
    default_full: tuple[Guid, ...] = ()  # ports that are full members of the default partition (SM node)
    default_limited_all: bool = True  # every other port is a limited member of the default partition


@dataclass(frozen=True, order=True)
class PkeyTable:
    """What a port's PKey table really holds, read with SMPs (``smpquery pkeys``)."""

    port_guid: Guid
    entries: tuple[int, ...]  # raw 16-bit entries, zeros dropped
    capacity: int = 0  # NodeInfo.PartitionCap (0 = unknown)
    lid: int = 0

    def keys(self) -> frozenset[PKey | int]:
        return frozenset(self.entries)

    def tenant_keys(self) -> frozenset[int]:
        """15-bit partition numbers held (full or limited), the default partition excluded."""
        return frozenset(e & 0x7FFF for e in self.entries if e & 0x7FFF) - {DEFAULT_PKEY}

    def full_keys(self) -> frozenset[int]:
        """15-bit partition numbers this port is a full member of."""
        return frozenset(e & 0x7FFF for e in self.entries if e & 0x8000)

    def limited_keys(self) -> frozenset[int]:
        return frozenset(e & 0x7FFF for e in self.entries if e and not e & 0x8000)


class SmState(enum.StrEnum):
    MASTER = "master"
    STANDBY = "standby"
    DISCOVERING = "discovering"
    NOTACTIVE = "notactive"
    UNKNOWN = "unknown"


@dataclass(frozen=True, order=True)
class SmSeen:
    """A subnet manager seen on the fabric (SMInfo / PortInfo.MasterSMLID)."""

    guid: Guid
    lid: int
    priority: int
    state: SmState
    description: str = ""  # the node description at ``lid``: set by the host, a claim (never a node's name)
    port_guid: Guid | None = None  # the port found at ``lid`` by discovery (where the SM really is)
    switch_guid: Guid | None = None  # the switch (and its port) discovery found that port cabled to
    switch_port: int | None = None


@dataclass(frozen=True, order=True)
class PortCable:
    """Where discovery (ibnetdiscover, the topology observe reads the ports by) found a CA port:
    the switch's node GUID and the switch port at the other end of its link."""

    port_guid: Guid
    switch_guid: Guid
    switch_port: int


@dataclass(frozen=True, order=True)
class SmFileSeen:
    """The partitions file on one SM host as read back (sha256), against what gpufabric wrote."""

    host: str  # the SM host's name in the driver's configuration
    role: str  # "master" | "standby" (by SMInfo of the master)
    sha256: str  # "" when the file is missing or could not be read (see ``error``)
    expected: str  # sha256 of what gpufabric last wrote and verified; "" when unknown
    error: str = ""


@dataclass(frozen=True)
class IbFabricState:
    """Observed InfiniBand state: PKey tables, SMs, and the SM's hardening settings."""

    tables: tuple[PkeyTable, ...] = ()
    sms: tuple[SmSeen, ...] = ()
    master_guid: Guid | None = None
    settings: tuple[tuple[str, str], ...] = ()  # e.g. ("sm_key", "0x..."), from the trusted SM's config
    sm_files: tuple[SmFileSeen, ...] = ()  # each SM host's partitions file (OpenSM driver with SM hosts)
    cabling: tuple[PortCable, ...] = ()  # each CA port's switch GUID/port as discovered (OpenSM driver; () not read)

    @cached_property
    def _by_guid(self) -> dict[Guid, PkeyTable]:
        return {t.port_guid: t for t in self.tables}

    def table(self, guid: Guid) -> PkeyTable | None:
        return self._by_guid.get(guid)
