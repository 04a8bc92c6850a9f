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

Kinds are registered under the ``gpufabric.fabrics`` entry-point group (name = fabric name),
drivers under ``gpufabric.drivers``. ``docs/fabrics.md`` says how to add one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from gpufabric.domain.findings import Violation
from gpufabric.domain.models import QUARANTINE, Lease, Network, Node, Offering, Segment

D = TypeVar("D")  # a fabric's desired slice
O = TypeVar("O")  # a fabric's observed slice


@dataclass(frozen=True)
class Tenancy:
    """The pure input every fabric derives its desired slice from: who owns each node now.

    ``owners`` maps every node to the lease that owns it now, or ``None`` (quarantine).
    ``settings`` are deployment-wide facts fabrics may need (e.g. ``quarantine_vlan``,
    ``sm_port_guids``), each with one source (``Fabrics``/``SegmentConfig``)."""

    nodes: tuple[Node, ...]
    owners: Mapping[str, Lease | None]
    networks: Mapping[str, Network]
    offerings: Mapping[str, Offering] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)

    def owner(self, node: str) -> str:
        lease = self.owners.get(node)
        return lease.tenant if lease is not None else QUARANTINE

    def lease_networks(self, node: str) -> tuple[Network, ...]:
        """The networks of the lease that owns ``node`` now (none in quarantine)."""
        lease = self.owners.get(node)
        if lease is None:
            return ()
        return tuple(self.networks[n] for n in lease.networks if n in self.networks)

    def offering(self, node: str) -> Offering | None:
        lease = self.owners.get(node)
        return self.offerings.get(lease.offering) if lease is not None else None


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

    def __len__(self) -> int:
        return len(self.lines())

    def __str__(self) -> str:
        return "\n".join(self.lines()) or "no changes"


@dataclass(frozen=True)
class InvariantSpec:
    """An audit invariant a fabric checks (for docs/audit.md and ``--select``)."""

    id: str
    severity: str  # a Severity value
    description: str


class FabricBackend(ABC, Generic[O]):
    """The I/O side of one fabric in one deployment."""

    capabilities: ClassVar[frozenset[str]] = frozenset({"observe", "apply"})

    @abstractmethod
    def observe(self) -> O:
        """Read the whole fabric's real state."""

    @abstractmethod
    def apply(self, plan: FabricPlan) -> O:
        """Apply ``plan`` (one transaction/session per device) and return the verified
        read-back of at least what it changed; raise a GpufabricError if it cannot."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections (default: nothing to release)."""


DriverLookup = Callable[[str], type]
"""Driver class by name (the ``gpufabric.drivers`` registry)."""


class FabricKind(ABC, Generic[D, O]):
    """The pure side of one fabric. Instances are stateless; one per fabric per process."""

    name: ClassVar[str]

    # ---- configuration
    @abstractmethod
    def build(self, section: Any, drivers: DriverLookup, settings: Mapping[str, Any]) -> FabricBackend[O]:
        """The backend for this fabric's section of ``fabrics.yaml`` (raise ConfigError)."""

    # ---- networks
    def allocate(self, network: Network, used: Collection[Segment], config: Any) -> Segment | None:
        """A new segment for ``network`` on this fabric (None: this fabric has no
        per-network segment). ``used`` are every network's segments on this fabric."""
        return None

    # ---- desired state and plan (pure)
    @abstractmethod
    def desired(self, tenancy: Tenancy) -> D:
        """This fabric's slice of the desired state."""

    @abstractmethod
    def diff(self, desired: D, observed: O) -> FabricPlan:
        """The changes that turn ``observed`` into ``desired`` (for what the fabric can program)."""

    @abstractmethod
    def as_observed(self, desired: D) -> O:
        """What ``desired`` reads back as (previews of later phases)."""

    @abstractmethod
    def empty_state(self) -> O:
        """The observed value of a fabric not yet read."""

    def merge(self, observed: O, read_back: O) -> O:
        """``observed`` updated with a (possibly partial) verified read-back."""
        return read_back

    @abstractmethod
    def tenants_seen(self, observed: O, tenancy: Tenancy) -> Mapping[str, frozenset[str]]:
        """node -> the tenants (or QUARANTINE) whose resources its ports hold in ``observed``.
        A node mapped to two tenants is split across tenants (must never happen)."""

    # ---- audit
    def invariants(self) -> tuple[InvariantSpec, ...]:
        return ()

    def audit(self, tenancy: Tenancy, desired: D, observed: O) -> Iterable[Violation]:
        """Findings of this fabric's own invariants (default: none beyond the core's)."""
        return ()

    # ---- display
    def summary(self, node: Node) -> str:
        """One cell of the node table: this fabric's resources of ``node``."""
        return ""
