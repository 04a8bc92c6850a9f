"""The fabric seam: what one fabric package provides so that the core (desired state, plan,
apply, audit, CLI tables) iterates over the registered fabrics instead of naming them.

A fabric package ``gpufabric.fabrics.<fabric>`` (importing only ``gpufabric.domain``) provides

* a :class:`FabricKind` (pure): its segment allocator for a network, its slice of the desired
  state derived from a :class:`Tenancy`, its pure ``diff(desired, observed) -> FabricPlan``,
  the state a desired slice reads back as (previews), how a partial read-back merges into a
  full one, who owns what in an observed state (the two-tenant sampler), and its audit
  invariants;
* a :class:`FabricBackend` (I/O) built by ``FabricKind.build(section, drivers)`` from the
  fabric's section of ``fabrics.yaml``: ``observe()`` reads the whole fabric, ``apply(plan)``
  applies one plan (one transaction/session per device) and returns the *verified* read-back
  of what it changed.

A deployment runs named *instances* of the kinds (``ib-compute``, ``ib-storage``: both ``infiniband``):
:meth:`FabricKind.bind` gives the kind object of one, whose :attr:`FabricKind.instance` keys its desired and
observed slices, plans, read-backs, segments, findings and ports (an unbound kind: its default instance, named
after it). A kind keeps a node's ports in the generic ``node_fabric_ports`` table (``ports_section``): it
parses and dumps a node's entries (``parse_ports``/``dump_ports``; :meth:`FabricKind.ports` reads them back).
A lease's terms and an offering's settings a kind reads are its own too (``lease_terms``, ``offering_settings``).

Kinds are registered under the ``gpufabric.fabrics`` entry-point group (name = fabric name),
drivers under ``gpufabric.drivers``. ``docs/fabrics.md`` says how to add one.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, NamedTuple, Self, TypeVar

from gpufabric.domain.drivers import DriverLookup as DriverLookup
from gpufabric.domain.drivers import build_driver as build_driver
from gpufabric.domain.entries import node_entries
from gpufabric.domain.errors import ConfigError, GpufabricError, ValidationError
from gpufabric.domain.findings import Violation
from gpufabric.domain.models import FabricPorts, Network, Node, PortKey, Segment
from gpufabric.domain.moves import Move, MoveRequest
from gpufabric.domain.site_check import SiteCheck, SiteContext
from gpufabric.domain.tenancy import Tenancy as Tenancy
from gpufabric.domain.terms import TermSpec
from gpufabric.domain.values import PortNaming, check_name

if TYPE_CHECKING:
    from gpufabric.domain.hooks import ImportFormat, PowerCycled
    from gpufabric.domain.segments import SegmentSection
    from gpufabric.domain.values import PortNaming
    from gpufabric.domain.views import ApiHost, CliGroup, FabricAccess

D = TypeVar("D")  # a fabric's desired slice
S = TypeVar("S")  # a fabric's observed slice


class FabricPlan(ABC):
    """The immutable, printable changes of one fabric. ``split()`` gives the part that only
    removes access (applied and verified on every fabric before any addition) and the rest."""

    fabric: ClassVar[str]

    @property
    @abstractmethod
    def empty(self) -> bool: ...

    @abstractmethod
    def lines(self) -> list[str]:
        """One human-readable line per change."""

    @abstractmethod
    def to_dict(self) -> Any:
        """JSON-able form (for ``--json`` and the API)."""

    @abstractmethod
    def split(self) -> tuple[FabricPlan, FabricPlan]:
        """(removals, additions): applying the first alone never grants any access."""

    def refusals(self) -> Mapping[str, GpufabricError]:
        """node -> why this plan leaves out what would give that node its tenant (the rest of the
        plan, the node's removals included, is made). The move engine fails the move that joins
        such a node alone, with that error; every other plan goes on. Default: none."""
        return {}

    def __len__(self) -> int:
        return len(self.lines())

    def __str__(self) -> str:
        return "\n".join(self.lines()) or "no changes"


@dataclass(frozen=True)
class Containment:
    """What :meth:`FabricBackend.contain` found (one line each) and cut off (device ids)."""

    findings: tuple[str, ...] = ()
    contained: tuple[str, ...] = ()


@dataclass(frozen=True)
class InvariantSpec:
    """An audit invariant a fabric checks (for docs/audit.md and ``--select``)."""

    id: str
    severity: str  # a Severity value
    description: str
    external: bool = False  # the caller may also hand in findings of it (AuditInput.extra_findings)


class PortSeen(NamedTuple):
    """One port of an inventory node and the tenants that own what it really carries (its
    *effective* tenants: owners of its VLANs, its non-default PKeys, ...; unowned resources and
    the default partition add none). The audit's ``X-NODE-SPLIT`` compares them across fabrics.
    A tuple, and ``port`` may be any object whose ``str()`` names the port (e.g. a ``Guid``):
    an audit makes one per port and formats only the few it reports."""

    node: str
    fabric: str
    device: str
    port: object
    tenants: frozenset[str]
    sep: str = " "  # between device and port in :attr:`label`

    @property
    def label(self) -> str:
        """How a message names the port, e.g. ``leaf1/p1`` or ``mlx5_0 0x...``."""
        return f"{self.device}{self.sep}{self.port}"


class FabricBackend(ABC, Generic[S]):
    """The I/O side of one fabric in one deployment."""

    capabilities: ClassVar[frozenset[str]] = frozenset({"observe", "apply"})

    @abstractmethod
    def observe(self) -> S:
        """Read the whole fabric's real state."""

    def observe_for_moves(self) -> S:
        """The state a move plans and verifies against: :meth:`observe`, less what only the audit
        reads (e.g. a DPU's datapath flows), which a fabric may leave out here. Default: observe()."""
        return self.observe()

    @abstractmethod
    def apply(self, plan: FabricPlan) -> S:
        """Apply ``plan`` (one transaction/session per device) and return the verified
        read-back of at least what it changed; raise a GpufabricError if it cannot."""

    def close(self) -> None:
        """Release connections (default: nothing to release)."""

    def before_move(self, tenancy: Tenancy, moves: Sequence[Move]) -> None:
        """Called once per batch before its quarantine phase changes anything, with ``tenancy``
        the owners before the move: refuse (raise a GpufabricError naming the node) moves this
        fabric cannot carry out, and prepare the nodes (e.g. drain them). A refusal cancels the
        batch with every fabric unchanged. Default: nothing."""

    def after_join(self, tenancy: Tenancy, moves: Sequence[Move]) -> None:
        """Called once per batch after its join phase is verified, with ``tenancy`` the new
        owners (e.g. make the nodes schedulable again). Default: nothing."""

    def metrics(self, tenancy: Tenancy) -> str:
        """This fabric's own series for ``/metrics``, in Prometheus text format, read now
        (``serve`` caches them between scrapes). Default: none."""
        return ""

    def contain(self, tenancy: Tenancy, desired: Any, observed: S, repair: bool) -> Containment:
        """Find intruders this fabric can see (e.g. rogue subnet managers) and, with
        ``repair``, cut them off (capability ``contain``). Default: none."""
        return Containment()

    def site_checks(self, context: SiteContext) -> Sequence[SiteCheck]:
        """Preflight of this fabric's devices for ``gpufabric site check`` (reachable, keys
        and certificates verified, pools free on the fabric, inventory ports seen), one
        finding each, never raising for a device at fault. Default: none."""
        return ()


class FabricKind(ABC, Generic[D, S]):
    """The pure side of one fabric kind. Objects are stateless but for the instance they are
    bound to and its ``fabrics.yaml`` section (:meth:`bind`); one per configured instance per
    process."""

    name: ClassVar[str]
    order: ClassVar[int] = 100
    """Where this kind's instances come among the kinds (columns, phases, listings): lower first;
    kinds of one order by name. The Ethernet and InfiniBand kinds set theirs below the default."""
    ports_section: bool = False
    """True: this kind keeps a node's ports in the generic table, read from the node entries'
    ``fabrics: {<instance>: [...]}`` section of the inventory (``parse_ports``/``dump_ports``)."""
    inventory_key: ClassVar[str | None] = None
    """A node entry's own inventory key for this kind's entries on its default instance (the DPU
    kind's ``dpus``: files from before ``fabrics:`` keep working). Needs ``ports_section``."""
    entry_schema: ClassVar[Mapping[str, Any] | None] = None
    """The JSON Schema of one of this kind's inventory entries: what the API's OpenAPI schema shows
    for its node field (the kind's ``parse_ports`` still checks every entry). None: any mapping."""

    # ---- instances
    @property
    def instance(self) -> str:
        """The fabric instance this object drives (default: the kind's own name)."""
        bound: str | None = self.__dict__.get("_instance")
        return bound or self.name

    @property
    def section(self) -> Any:
        """The ``fabrics.yaml`` section of the instance this object is bound to (None: bound
        without one, e.g. a kind's default instance): what the pure side reads of its own
        instance (e.g. an InfiniBand subnet's own segment pool)."""
        return self.__dict__.get("_section")

    def bind(self, instance: str, section: Any = None) -> Self:
        """This kind bound to the fabric instance ``instance`` and its ``fabrics.yaml``
        ``section`` (a shallow copy)."""
        check_name("fabrics[].name", instance)
        other = copy.copy(self)
        other.__dict__["_instance"] = instance
        other.__dict__["_section"] = section
        return other

    # ---- inventory (kinds with ``ports_section``)
    def parse_ports(self, node: str, raw: Any, where: str) -> tuple[Any, ...]:
        """A node's entries of this kind's inventory section -> immutable port values; raise a
        ValidationError whose field starts with ``where`` (e.g. ``nodes[2].fabrics.mem-a[0]``)."""
        raise ConfigError(f"{where}", self.name, "a fabric kind with an inventory section (ports_section)")

    def dump_ports(self, ports: tuple[Any, ...]) -> list[Any]:
        """The JSON-able entries ``parse_ports`` reads back as ``ports``."""
        return []

    def port_keys(self, ports: tuple[Any, ...]) -> Iterable[PortKey | Any]:
        """What ``ports`` (one node's, on this instance) hold that no other node may: each a
        :class:`PortKey`, once per node (the store keeps them unique with a database constraint
        and finds a port's node by them). A plain value ``v`` means
        ``PortKey(<instance>, str(v))``: unique on this instance. Default: none."""
        return ()

    def keys(self, ports: tuple[Any, ...]) -> tuple[PortKey, ...]:
        """:meth:`port_keys` as :class:`PortKey` values (a plain value: unique on this instance)."""
        out: dict[tuple[str, str], PortKey] = {}
        for k in self.port_keys(ports):
            key = k if isinstance(k, PortKey) else PortKey(self.instance, str(k), "", f"ports on fabric {self.instance}",
                                                           f"port {k} on fabric {self.instance}")  # fmt: skip
            out.setdefault((key.scope, key.key), key)
        return tuple(out.values())

    def stored(self, ports: tuple[Any, ...]) -> FabricPorts:
        """One node's ``ports`` on this instance as the store keeps them: dumped, with their keys."""
        return FabricPorts.of(self.instance, self.dump_ports(ports), self.keys(ports))

    def for_inventory(self, namings: Mapping[str, PortNaming]) -> Self:
        """This kind reading an inventory file whose devices name their ports by ``namings``
        (device -> naming, from every kind's :meth:`port_namings`): a kind whose entries name
        device ports checks them against it in :meth:`parse_ports`. Default: itself."""
        return self

    def listed_ports(self, node: Node, instances: Collection[str] = ()) -> Sequence[Mapping[str, Any]] | None:
        """Every port of ``node`` on this kind's default instance and its ``instances`` (the
        configured ones), as the API's node answer lists them under ``ports.<kind>`` (what
        integrations such as the Neutron driver match a port binding against); None: the kind
        lists none there. Default: None."""
        return None

    def lookup_key(self, query: Mapping[str, str]) -> PortKey | None:
        """The :class:`PortKey` the port lookup ``query`` (``GET /api/v1/ports/lookup``'s
        parameters) names on this kind, or None when it names none of this kind's ports."""
        return None

    def ports(self, node: Node) -> tuple[Any, ...]:
        """``node``'s ports on this instance (its generic-table entries, parsed; a kind with an
        ``inventory_key``: its default instance's when the node has none of its own here)."""
        return node_entries(node, self.instance, self.parse_ports, self.name if self.inventory_key else None)

    # ---- a lease's terms and an offering's settings (domain/terms.py)
    lease_terms: ClassVar[tuple[TermSpec, ...]] = ()
    """The lease terms this kind reads (e.g. a count of GPUs): fields of the API's move and lease bodies and
    answers, checked against their range and stored with the lease; ``desired()`` reads ``lease.term(name)``."""

    def check_request(self, node: Node, request: MoveRequest) -> None:
        """Refuse, before any write, a request of :attr:`lease_terms` ``node`` cannot hold (ValidationError)."""

    offering_settings: ClassVar[Mapping[str, str]] = {}
    """``Offering.settings`` keys this kind reads that an offering's answer shows as fields of their own,
    each with its value when unset (the DPU kind's OVN-Kubernetes mode)."""

    def import_formats(self) -> Sequence[ImportFormat]:
        """Inventory import formats of this kind's own (``inventory import --format NAME``,
        :mod:`gpufabric.domain.hooks`). Default: none."""
        return ()

    def port_namings(self, fabrics_yaml: Mapping[str, Any]) -> Mapping[str, PortNaming]:
        """device -> the naming its ports must follow in an inventory file, for this kind's
        devices in a ``fabrics.yaml`` mapping (an inventory file is checked against it on
        import). Default: none."""
        return {}

    # ---- configuration
    top_level: ClassVar[frozenset[str]] = frozenset()
    """The top-level keys of ``fabrics.yaml`` this kind reads: deployment-wide facts beside the
    instances (the InfiniBand kind's trusted SM GUIDs)."""

    def deployment_settings(self, fabrics_yaml: Mapping[str, Any]) -> Mapping[str, Any]:
        """The settings this kind's :attr:`top_level` keys of ``fabrics_yaml`` give every kind
        (``Tenancy.settings``, the ``settings`` a build gets); a ConfigError names a bad key.
        Default: none."""
        return {}

    def check_instances(self, sections: Mapping[str, Any], config: Any = None) -> None:
        """Refuse a set of instances of this kind that cannot run side by side (``sections``:
        instance -> its ``fabrics.yaml`` section), before any is built: raise a ConfigError
        naming the field (``fabrics.<instance>...``). ``config``: the deployment's SegmentConfig
        (as :meth:`allocate`'s; None: not known, checks against it skipped). Default: none."""

    def segment_config(self, raw: Any, where: str) -> SegmentSection:
        """This kind's section ``segments.<where>`` of config.yaml (None: absent) parsed with its defaults and validated
        on its own; what the core does with it: :mod:`gpufabric.domain.segments`. Default: the kind takes none."""
        raise ConfigError(f"segments.{where}", raw, f"a fabric kind that takes a segments section ({self.name} takes none)")

    @abstractmethod
    def build(self, section: Any, drivers: DriverLookup, settings: Mapping[str, Any]) -> FabricBackend[S]:
        """The backend for this fabric's section of ``fabrics.yaml`` (raise ConfigError)."""

    # ---- networks
    def allocate(self, network: Network, used: Collection[Segment], config: Any) -> Segment | None:
        """A new segment for ``network`` on this fabric (None: this fabric has no
        per-network segment). ``used`` are every network's segments on this fabric."""
        return None

    def adopt(self, network: Network, seg_id: int, used: Collection[Segment], config: Any) -> Segment:
        """The segment ``seg_id`` given explicitly for ``network`` on this instance (an adopted
        segmentation id, the Neutron integration's): a ValidationError naming
        ``segments.<instance>.seg_id`` out of range, a ConflictError when ``used`` (every
        network's segments on this kind's instances) holds it. Default: refused."""
        raise ValidationError(
            "segments.fabric", self.instance, "a fabric that takes explicit segmentation ids",
            f"fabric {self.instance} does not take explicit segmentation ids",
        )  # fmt: skip

    def segment_options(self, raw: Mapping[str, Any], where: str) -> tuple[tuple[str, int | bool], ...]:
        """A network's own settings on this instance (``network create --option``, the API's
        ``options``), validated and normalized (sorted by key): a ValidationError naming
        ``<where>.<key>`` and its range, before anything is written. Default: none taken."""
        if raw:
            raise ValidationError(where, ", ".join(sorted(map(str, raw))), f"no options on fabric {self.instance}")
        return ()

    def segment_label(self, segment: Segment) -> str:
        """``segment`` as a person reads it (``network list``'s cell, the API's ``label``), e.g.
        ``vlan 2000`` or ``seg 3000 -> pkey 0x0a00``. Default: its segmentation id."""
        return f"seg {segment.seg_id}"

    def segment_view(self, segment: Segment) -> Mapping[str, Any]:
        """This kind's own fields of ``segment`` in the API's network answer (the Ethernet kind's
        ``vlan``, the InfiniBand kind's ``pkey``). Default: none."""
        return {}

    @property
    def allocates(self) -> bool:
        """True when this kind gives networks a segment of their own (overrides :meth:`allocate`):
        the instances a network may name (``network create --fabric``)."""
        return type(self).allocate is not FabricKind.allocate

    @property
    def adopts(self) -> bool:
        """True when this kind takes explicit segmentation ids (overrides :meth:`adopt`)."""
        return type(self).adopt is not FabricKind.adopt

    # ---- desired state and plan (pure)
    @abstractmethod
    def desired(self, tenancy: Tenancy) -> D:
        """This fabric's slice of the desired state."""

    @abstractmethod
    def diff(self, desired: D, observed: S) -> FabricPlan:
        """The changes that turn ``observed`` into ``desired`` (for what the fabric can program)."""

    @abstractmethod
    def as_observed(self, desired: D) -> S:
        """What ``desired`` reads back as (previews of later phases)."""

    @abstractmethod
    def empty_state(self) -> S:
        """The observed value of a fabric not yet read."""

    def merge(self, observed: S, read_back: S) -> S:
        """``observed`` updated with a (possibly partial) verified read-back."""
        return read_back

    @abstractmethod
    def tenants_seen(self, observed: S, tenancy: Tenancy) -> Mapping[str, frozenset[str]]:
        """node -> the tenants (or QUARANTINE) whose resources its ports hold in ``observed``.
        A node mapped to two tenants is split across tenants (must never happen)."""

    # ---- audit
    def invariants(self) -> tuple[InvariantSpec, ...]:
        return ()

    def audit(self, tenancy: Tenancy, desired: D, observed: S) -> Iterable[Violation]:
        """Findings of this fabric's own invariants, and of the shared ``X-DRIFT``
        (:data:`~gpufabric.domain.findings.DRIFT`). The service always hands in the desired
        slice; an audit run without one (tests, ``AuditInput.desired`` left out) passes ``None``,
        which a kind that can (Ethernet, InfiniBand) takes as "skip desired-vs-observed
        comparisons". Default: none."""
        return ()

    def ports_seen(self, observed: S, tenancy: Tenancy) -> Iterable[PortSeen]:
        """Every inventory port with non-empty effective tenants in ``observed``. A kind that
        implements it takes part in the audit's per-port ``X-NODE-SPLIT``; the others in
        ``X-NODE-SPLIT-FABRICS`` (through :meth:`tenants_seen`). Default: none."""
        return ()

    # ---- display
    def summary(self, node: Node, tenancy: Tenancy | None = None) -> str:
        """One cell of the node table: this fabric's resources of ``node``, one line per
        resource in full (``node list --wide``; the 80-column table abbreviates it).
        ``tenancy``: who holds the node now (None: unknown, shown as in quarantine)."""
        return ""

    def node_view(self, node: Node, tenancy: Tenancy | None = None) -> Mapping[str, Any]:
        """This fabric's JSON fragment of ``node`` (``GET /api/v1/nodes/N`` and
        ``node list --json``, under ``fabrics.<instance>``). Default: nothing."""
        return {}

    # ---- a node's power cycle (``gpufabric node power-cycled``, gpufabric.domain.hooks)
    power_cycle_needs: ClassVar[str | None] = None
    """What a node must have for this kind to react to its power cycle, as an error's
    ``allowed`` says it (e.g. "a node with a DPU in the inventory"); None: it never reacts."""

    def power_cycled(self, node: Node, fabrics: FabricAccess) -> PowerCycled | None:
        """An operator power-cycled ``node`` (cold): read again what this kind reads of it only
        at boot, through ``fabrics`` (this instance's backend), and refuse (a GpufabricError
        naming the node) while it still reports a change pending. None: this kind has nothing on
        ``node`` (the default)."""
        return None

    # ---- the kind's own commands and routes (gpufabric.domain.views)
    def cli_group(self) -> CliGroup | None:
        """A command group of this kind's own (``gpufabric <name> ...``), mounted by the CLI
        beside the core's. Default: none."""
        return None

    def api_router(self, host: ApiHost) -> Any:
        """A FastAPI ``APIRouter`` of this kind's own routes, mounted under ``/api/v1`` (None:
        none; the default)."""
        return None
