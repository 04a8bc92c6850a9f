"""Immutable domain models: the inventory (nodes and their ports on each fabric),
tenants, networks with one segment per fabric instance, offerings and leases.

A fabric *instance* is a named fabric of one kind in a deployment (``fabrics.yaml``); the
default instance of a kind is named after it, so the :class:`Fabric` values are also the
default instance names. Kinds without a typed table keep a node's ports as
:class:`FabricPorts` (their own validated entries, per instance)."""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.terms import LeaseTerms, term, terms_of
from gpufabric.domain.values import Guid, PKey, VlanId, check_mac, check_name


class Fabric(enum.StrEnum):
    ETHERNET = "ethernet"
    INFINIBAND = "infiniband"
    NVLINK = "nvlink"
    DPU = "dpu"


class NodeState(enum.StrEnum):
    AVAILABLE = "available"  # in quarantine, leasable
    LEASED = "leased"
    MOVING = "moving"
    MAINTENANCE = "maintenance"


QUARANTINE = "quarantine"
"""The pseudo-tenant that owns every port not in a lease."""


BOND_MODES = ("lacp", "active-backup")


@dataclass(frozen=True)
class EthernetPort:
    """A node NIC cabled to a switch port. A bonded NIC's switch port is a member of the
    switch's aggregate interface ``bond`` (port-channel, ``ae``, OVS bond): the VLANs are set on
    the aggregate, never on the member; the members of one node with the same ``bond`` name on
    one switch, or on an MLAG/vPC pair of two switches, are one bond."""

    node: str
    name: str  # the NIC name on the host, e.g. eth0
    switch: str
    switch_port: str
    mac: str = ""
    bond: str = ""  # the switch's aggregate interface this port is a member of ("" = not bonded)
    bond_mode: str = ""  # lacp | active-backup (with bond only)

    def __post_init__(self) -> None:
        check_name("ethernet_port.node", self.node)
        if not self.switch or not self.switch_port:
            raise ValidationError(
                "ethernet_port.switch", f"{self.switch}/{self.switch_port}", "non-empty switch and port"
            )
        if self.bond and self.bond == self.switch_port:
            raise ValidationError("ethernet_port.bond", self.bond, f"an aggregate interface other than the member {self.switch_port}")
        if (self.bond_mode or self.bond) and self.bond_mode not in BOND_MODES:
            what = ", ".join(BOND_MODES) if self.bond else "empty (no bond)"
            raise ValidationError("ethernet_port.bond_mode", self.bond_mode, what)

    @property
    def managed_port(self) -> str:
        """The switch interface that carries this NIC's VLANs: the aggregate when bonded."""
        return self.bond or self.switch_port
        if self.mac:
            object.__setattr__(self, "mac", check_mac("ethernet_port.mac", self.mac))


@dataclass(frozen=True)
class IbPort:
    """An HCA port on the InfiniBand fabric, matched to its node by node description."""

    node: str
    device: str  # e.g. mlx5_0
    port_num: int
    port_guid: Guid
    node_guid: Guid
    switch_guid: Guid | None = None
    switch_port: int | None = None
    instance: str = ""  # the fabric instance (subnet) it is cabled to; "": the kind's default instance

    def __post_init__(self) -> None:
        check_name("ib_port.node", self.node)
        if self.instance:
            check_name("ib_port.instance", self.instance)
        if not 1 <= self.port_num <= 254:
            raise ValidationError("ib_port.port_num", self.port_num, "1-254")
        if self.switch_port is not None and not 1 <= self.switch_port <= 254:
            raise ValidationError("ib_port.switch_port", self.switch_port, "1-254")


@dataclass(frozen=True, order=True)
class FabricPorts:
    """A node's ports on one fabric instance whose kind has no typed table: the entries its kind
    validated (``FabricKind.parse_ports``) and dumped (``dump_ports``), as canonical JSON text
    (immutable and comparable; stored as is in ``node_fabric_ports``)."""

    instance: str
    data: str = "[]"

    def __post_init__(self) -> None:
        check_name("fabric_ports.instance", self.instance)

    @staticmethod
    def of(instance: str, entries: object) -> FabricPorts:
        return FabricPorts(instance, json.dumps(entries, sort_keys=True, separators=(",", ":")))

    @property
    def entries(self) -> object:
        return json.loads(self.data)


@dataclass(frozen=True)
class Node:
    name: str
    offering: str = ""
    state: NodeState = NodeState.AVAILABLE
    ethernet: tuple[EthernetPort, ...] = ()
    ib: tuple[IbPort, ...] = ()
    fabric_ports: tuple[FabricPorts, ...] = ()  # sorted by instance, one per instance

    def __post_init__(self) -> None:
        check_name("node.name", self.name)
        instances = [p.instance for p in self.fabric_ports]
        if len(set(instances)) != len(instances):
            raise ValidationError("node.fabric_ports", ", ".join(instances), "one entry per fabric instance")
        owners: list[str] = [p.node for p in self.ethernet] + [p.node for p in self.ib]
        for owner in owners:
            if owner != self.name:
                raise ValidationError("node.port.node", owner, f"the node's own name {self.name!r}")

    def ports_on(self, instance: str) -> FabricPorts | None:
        """This node's generic-table ports on fabric instance ``instance`` (None: none)."""
        return next((p for p in self.fabric_ports if p.instance == instance), None)


@dataclass(frozen=True)
class Tenant:
    name: str

    def __post_init__(self) -> None:
        check_name("tenant.name", self.name)
        if self.name == QUARANTINE:
            raise ValidationError("tenant.name", self.name, "any name but 'quarantine' (reserved)")


@dataclass(frozen=True)
class Segment:
    """A network's isolation id on one fabric instance (``fabric``: the instance name; a
    :class:`Fabric` value for a kind's default instance). ``seg_id`` is the Neutron-style integer."""

    fabric: str
    seg_id: int
    vlan: VlanId | None = None
    pkey: PKey | None = None
    options: tuple[tuple[str, int | bool], ...] = ()
    """The network's own settings on this instance, as its kind validated them
    (:meth:`~gpufabric.domain.fabric.FabricKind.segment_options`; e.g. IPoIB ``mtu``)."""


NetworkOptions = Mapping[str, tuple[tuple[str, int | bool], ...]]
"""A network's own settings per fabric instance (instance -> :attr:`Segment.options`)."""


@dataclass(frozen=True)
class Network:
    name: str
    tenant: str
    segments: tuple[Segment, ...] = ()

    def __post_init__(self) -> None:
        check_name("network.name", self.name)
        check_name("network.tenant", self.tenant)

    def segment(self, fabric: str) -> Segment | None:
        """The segment on fabric instance ``fabric`` (a Fabric value names a default instance)."""
        return next((s for s in self.segments if s.fabric == fabric), None)


@dataclass(frozen=True)
class Offering:
    """A named profile a node is handed over in (openstack, openshift, baremetal, ...).
    ``settings``: what the fabric kinds read of it, each kind its own keys
    (``FabricKind.offering_settings`` declares those shown as fields of its answer)."""

    name: str
    description: str = ""
    settings: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        check_name("offering.name", self.name)

    def setting(self, key: str) -> str | None:
        """The value of setting ``key`` (None: unset)."""
        return dict(self.settings).get(key)


BUILTIN_OFFERINGS: tuple[Offering, ...] = (
    Offering("baremetal", "plain bare metal, tenant gets the host"),
    Offering("openstack", "Ironic/ESI node handed to an OpenStack project"),
    Offering("openshift", "OpenShift worker; SmartNIC hosts run OVN-K in dpu-host mode", (("dpu_mode", "dpu-host"),)),
)
"""Seeded into every store. Their settings are data the kinds read (the DPU kind's ``dpu_mode``:
OpenShift's SmartNIC hosts run OVN-Kubernetes in dpu-host mode)."""


def lease_active(start: datetime, end: datetime | None, t: datetime) -> bool:
    """Is a lease of ``[start, end)`` in force at ``t``: the one rule (a lease ending exactly at ``t`` is
    over, one starting at ``t`` has begun). The store's SQL is its translation, ``store.tables.lease_active_at``."""
    return start <= t and lease_not_over(end, t)


def lease_not_over(end: datetime | None, t: datetime) -> bool:
    """The lease has not ended at ``t`` (in force or still to come): ending exactly at ``t`` is over."""
    return end is None or t < end


@dataclass(frozen=True)
class Lease:
    tenant: str
    node: str
    start: datetime
    end: datetime | None = None
    networks: tuple[str, ...] = ()
    offering: str = "baremetal"
    owner: str = "admin"
    id: int | None = None
    terms: LeaseTerms = ()  # what the fabric kinds' declared terms ask of the node (domain/terms.py)

    def __post_init__(self) -> None:
        check_name("lease.tenant", self.tenant)
        check_name("lease.node", self.node)
        object.__setattr__(self, "terms", terms_of(self.terms))
        if self.end is not None and (self.end.tzinfo is None) != (self.start.tzinfo is None):
            allowed = "an ISO 8601 date-time with a timezone, e.g. 2026-12-01T09:00:00Z"
            raise ValidationError("lease.end", self.end.isoformat(), allowed, "no timezone")
        if self.end is not None and self.end <= self.start:
            raise ValidationError("lease.end", self.end.isoformat(), f"after start {self.start.isoformat()}")

    def active_at(self, t: datetime) -> bool:
        return lease_active(self.start, self.end, t)

    def term(self, name: str) -> int | None:
        """The value of the lease term ``name`` (None: unset)."""
        return term(self.terms, name)


@dataclass(frozen=True)
class Inventory:
    """Everything known about the hardware: nodes with their ports."""

    nodes: tuple[Node, ...] = field(default_factory=tuple)

    def node(self, name: str) -> Node | None:
        return next((n for n in self.nodes if n.name == name), None)
