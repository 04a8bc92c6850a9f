"""Immutable domain models: the inventory (nodes and their ports on each fabric),
tenants, networks with one segment per fabric instance, offerings and leases.

A fabric *instance* is a named fabric of one kind in a deployment (``fabrics.yaml``); the
default instance of a kind is named after it (``ethernet``, ``infiniband``, ...). Every kind keeps a node's ports as :class:`FabricPorts` (its own
validated entries, per instance, with the :class:`PortKey` values no other node may hold)."""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.terms import LeaseTerms, term, terms_of
from gpufabric.domain.values import check_description, check_name, check_tags


class NodeState(enum.StrEnum):
    AVAILABLE = "available"  # in quarantine, leasable
    LEASED = "leased"
    MOVING = "moving"
    MAINTENANCE = "maintenance"


QUARANTINE = "quarantine"
"""The pseudo-tenant that owns every port not in a lease."""


@dataclass(frozen=True, order=True)
class PortKey:
    """One thing a node's port holds that no other node may (``FabricKind.port_keys``): unique per
    ``scope`` across the deployment, kept by the store with a database constraint
    (``node_port_keys``), so two replicas never hand one switch port or GUID to two nodes.

    ``scope`` names what is unique, by the kind that owns it (e.g. the Ethernet kind's switch
    ports); ``key`` is its canonical text. ``at`` is where it is in the node's entries of the
    kind (``[0].switch_port``: an error names the file's field), ``what`` says what is unique in
    an error ("switch ports") and ``label`` names this one ("switch port leaf1/Ethernet10 (node
    gpu09 eth0)"). A node holds a key once (a kind gives a key its ports share, e.g. a bond's
    aggregate, once)."""

    scope: str
    key: str
    at: str = field(default="", compare=False)
    what: str = field(default="", compare=False)
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.scope or not self.key:
            raise ValidationError("port_key", f"{self.scope}:{self.key}", "a non-empty scope and key")


@dataclass(frozen=True, order=True)
class FabricPorts:
    """A node's ports on one fabric instance: the entries its kind validated
    (``FabricKind.parse_ports``) and dumped (``dump_ports``), as canonical JSON text (immutable
    and comparable; stored as is in ``node_fabric_ports``), and the :class:`PortKey` values the
    kind gave them (``keys``: written beside them for the database's uniqueness; not part of the
    value's identity, and not read back with a node)."""

    instance: str
    data: str = "[]"
    keys: tuple[PortKey, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        check_name("fabric_ports.instance", self.instance)

    @staticmethod
    def of(instance: str, entries: object, keys: tuple[PortKey, ...] = ()) -> FabricPorts:
        return FabricPorts(instance, json.dumps(entries, sort_keys=True, separators=(",", ":")), keys)

    @property
    def entries(self) -> object:
        return json.loads(self.data)


@dataclass(frozen=True)
class Node:
    """A server of the inventory: its ports on every fabric instance are its kinds' entries
    (``fabric_ports``, one per instance; each kind reads its own through ``FabricKind.ports``).

    A *slot* (issue 33: a VM's share of a shared host, :mod:`gpufabric.domain.slots`) is a node too,
    so that it is leased, moved and audited as nodes are: ``host`` names the host it is carved from
    and ``slot_modules`` the GPU module ids it holds (one NVLink partition of the host's board). It
    holds no ports of its own: each kind derives the slot's resources (its partition, its GPUs'
    rail HCAs, its VM ports) from the host's entries and these GPUs."""

    name: str
    offering: str = ""
    state: NodeState = NodeState.AVAILABLE
    fabric_ports: tuple[FabricPorts, ...] = ()  # sorted by instance, one per instance
    host: str = ""
    slot_modules: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        check_name("node.name", self.name)
        if self.host or self.slot_modules:
            check_name("node.host", self.host)
            mods = tuple(self.slot_modules)
            if not mods or any(isinstance(g, bool) or not isinstance(g, int) or not 1 <= g <= 64 for g in mods):
                raise ValidationError("node.slot_modules", list(mods), "1-64 GPU module ids, each 1-64")
            if len(set(mods)) != len(mods) or self.host == self.name or self.fabric_ports:
                raise ValidationError("node.slot_modules", list(mods), "distinct module ids of another node (the host), no ports of its own")
            object.__setattr__(self, "slot_modules", tuple(sorted(mods)))
        instances = [p.instance for p in self.fabric_ports]
        if len(set(instances)) != len(instances):
            raise ValidationError("node.fabric_ports", ", ".join(instances), "one entry per fabric instance")

    def ports_on(self, instance: str) -> FabricPorts | None:
        """This node's ports on fabric instance ``instance`` (None: none)."""
        return next((p for p in self.fabric_ports if p.instance == instance), None)

    def with_ports(self, *ports: FabricPorts) -> Node:
        """This node with ``ports`` in place of its entries on their instances (an empty list of
        entries removes the instance's)."""
        mine = {p.instance: p for p in self.fabric_ports}
        mine.update({p.instance: p for p in ports})
        kept = tuple(mine[i] for i in sorted(mine) if mine[i].data != "[]")
        return dataclasses.replace(self, fabric_ports=kept)

    @property
    def is_slot(self) -> bool:
        """This node is a slot of a shared host (:attr:`host`)."""
        return bool(self.host)


@dataclass(frozen=True)
class Tenant:
    name: str

    def __post_init__(self) -> None:
        check_name("tenant.name", self.name)
        if self.name == QUARANTINE:
            raise ValidationError("tenant.name", self.name, "any name but 'quarantine' (reserved)")


@dataclass(frozen=True)
class Segment:
    """A network's isolation id on one fabric instance (``fabric``: the instance name; the kind's
    own name for its default instance). ``seg_id`` is the Neutron-style integer; ``key`` the
    fabric's own id of the segment, which its kind gives and reads (the Ethernet kind's VLAN, the
    InfiniBand kind's 15-bit PKey; None: the fabric has none but ``seg_id``), unique per ``scope``
    (the kind's name for what ``key`` is, e.g. ``ethernet.vlan``) across the deployment: the store
    keeps it so with a database constraint."""

    fabric: str
    seg_id: int
    key: int | None = None
    scope: str = ""
    options: tuple[tuple[str, int | bool], ...] = ()
    """The network's own settings on this instance, as its kind validated them
    (:meth:`~gpufabric.domain.fabric.FabricKind.segment_options`; e.g. IPoIB ``mtu``)."""


NetworkOptions = Mapping[str, tuple[tuple[str, int | bool], ...]]
"""A network's own settings per fabric instance (instance -> :attr:`Segment.options`)."""


@dataclass(frozen=True)
class Network:
    """A tenant's network: its segments (fixed once made) and its own description and tags
    (updatable with its name: ``network update``)."""

    name: str
    tenant: str
    segments: tuple[Segment, ...] = ()
    description: str = ""
    tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_name("network.name", self.name)
        check_name("network.tenant", self.tenant)
        check_description("network.description", self.description)
        object.__setattr__(self, "tags", check_tags("network.tags", self.tags))

    def segment(self, fabric: str) -> Segment | None:
        """The segment on fabric instance ``fabric`` (a kind's name names its default instance)."""
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
    Offering("vm-host", "hypervisor whose GPUs are rented as VM slots, one NVLink partition each", (("shared", "slots"),)),
)
"""Seeded into every store. Their settings are data the kinds read (the DPU kind's ``dpu_mode``:
OpenShift's SmartNIC hosts run OVN-Kubernetes in dpu-host mode) and the core reads (``shared:
slots``: a node leased in this offering is a shared host, :mod:`gpufabric.domain.slots`)."""


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
    host_ids: tuple[tuple[str, str], ...] = ()
    """(node name, host id) of nodes an outside inventory names: the node's identity there, what
    Neutron's ``binding:host_id`` names (Ironic's node UUID). Written with the nodes; a node not
    listed keeps the one it has."""

    def node(self, name: str) -> Node | None:
        return next((n for n in self.nodes if n.name == name), None)
