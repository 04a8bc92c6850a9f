"""Fabric state values shared by drivers, planning and audit.

The same types describe *desired* state (derived from leases by planning) and
*observed* state (read back from the real fabrics by drivers), so that a plan is the
difference of two values of one type and an audit is a check of one observed value.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from gpufabric.domain.values import DEFAULT_PKEY, Guid, Membership, PKey, VlanId


# --------------------------------------------------------------------------- Ethernet
class PortMode(enum.StrEnum):
    ACCESS = "access"
    TRUNK = "trunk"
    SHUTDOWN = "shutdown"


@dataclass(frozen=True, order=True)
class EthernetPortConfig:
    """VLAN configuration of one switch port (desired or observed)."""

    switch: str
    port: str
    mode: PortMode
    vlan: VlanId | None = None  # access VLAN, or native VLAN of a trunk
    trunks: tuple[VlanId, ...] = ()  # allowed tagged VLANs (trunk mode)
    # bonds, outside equality (a member's VLANs are its aggregate's): on a member port, the
    # aggregate it is in (observed) / goes back into (a change); on a desired aggregate, its
    # member ports on this switch; the inventory's bond mode (lacp | active-backup)
    bond: str = field(default="", compare=False)
    members: tuple[str, ...] = field(default=(), compare=False)
    bond_mode: str = field(default="", compare=False)
    node: str = field(default="", compare=False, repr=False)  # a desired aggregate's inventory node (refusals name it)

    def vlans(self) -> frozenset[int]:
        """Every VLAN whose traffic this port carries."""
        if self.mode is PortMode.SHUTDOWN:
            return frozenset()
        s = {v.value for v in self.trunks}
        if self.vlan is not None:
            s.add(self.vlan.value)
        return frozenset(s)


@dataclass(frozen=True)
class SwitchState:
    """Every port of one switch that gpufabric manages, keyed by port name."""

    switch: str
    ports: tuple[EthernetPortConfig, ...] = ()

    @cached_property
    def _by_name(self) -> dict[str, EthernetPortConfig]:
        return {p.port: p for p in self.ports}

    def port(self, name: str) -> EthernetPortConfig | None:
        return self._by_name.get(name)


# --------------------------------------------------------------------------- InfiniBand
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
    node: str = ""  # node description's host part, when known
    port_guid: Guid | None = None  # the port found at ``lid`` by discovery (where the SM really is)


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

    @cached_property
    def _by_guid(self) -> dict[Guid, PkeyTable]:
        return {t.port_guid: t for t in self.tables}

    def table(self, guid: Guid) -> PkeyTable | None:
        return self._by_guid.get(guid)


# --------------------------------------------------------------------------- all fabrics
class FabricState:
    """Everything observed on every fabric at one time: one slice per fabric name, each of
    the type that fabric's :class:`~gpufabric.domain.fabric.FabricKind` reads and plans.
    ``switches`` and ``ib`` name the built-in Ethernet and InfiniBand slices."""

    __slots__ = ("_slices",)

    def __init__(
        self,
        switches: tuple[SwitchState, ...] | None = None,
        ib: IbFabricState | None = None,
        *,
        slices: Mapping[str, Any] | None = None,
    ) -> None:
        s = dict(slices or {})
        if switches is not None:
            s["ethernet"] = tuple(switches)
        if ib is not None:
            s["infiniband"] = ib
        self._slices: dict[str, Any] = s

    @property
    def slices(self) -> Mapping[str, Any]:
        return dict(self._slices)

    def get(self, fabric: str, default: Any = None) -> Any:
        return self._slices.get(fabric, default)

    def with_slice(self, fabric: str, value: Any) -> FabricState:
        return FabricState(slices={**self._slices, fabric: value})

    @property
    def switches(self) -> tuple[SwitchState, ...]:
        return tuple(self._slices.get("ethernet", ()))

    @property
    def ib(self) -> IbFabricState:
        v = self._slices.get("infiniband")
        return v if isinstance(v, IbFabricState) else IbFabricState()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FabricState) and self._slices == other._slices

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._slices)))

    def __repr__(self) -> str:
        return f"FabricState({', '.join(f'{k}={v!r}' for k, v in sorted(self._slices.items()))})"
