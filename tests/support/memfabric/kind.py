"""The ``memory`` test fabric: one string tag per node port (the owning tenant, or
quarantine), with its own :class:`FabricKind`, :class:`FabricBackend` and :class:`FabricPlan`.

By default (``MemoryKind()``) every node has ``ports_per_node`` ports named ``<node>/m<i>``,
invented from its name, and the desired tag of each is ``tenancy.owner(node)``.

``MemoryKind(inventory=True)`` owns its whole column instead, through the generic seams only
(:mod:`support.memfabric.column`): its ports come from the inventory's ``fabrics:
{<instance>: [{name, link}]}`` section (kept in the generic ``node_fabric_ports`` table), a
network gets a segment on each instance (``FabricKind.allocate``), a port's tag is its
owner plus the segments of its lease's networks on that instance (``ta@1+2``), and the node
has an API fragment (``node_view``) and a table cell (``summary``).

``split()`` moves a port from tenant X to tenant Y through quarantine (removal X ->
quarantine, addition quarantine -> Y), so the removal part never grants anything. Its own
audit invariant, ``MEM-TAG-DRIFT``, reports a port whose tag is not the desired one, naming
the instance. ``fabrics.yaml``: ``memory: {driver: mem-tags, options: {}}`` or instances
``fabrics: [{name: mem-a, kind: memory, driver: mem-tags}]``.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.fabric import DriverLookup, FabricBackend, FabricKind, FabricPlan, InvariantSpec, Tenancy
from gpufabric.domain.findings import Violation
from gpufabric.domain.models import QUARANTINE, Network, Node, Segment
from gpufabric.domain.severity import Severity

from support.memfabric import column
from support.memfabric.faults import Faults

FABRIC = "memory"
DRIFT_ID = "MEM-TAG-DRIFT"


@dataclass(frozen=True)
class MemState:
    """Observed (or desired) tags: ``((port, tag), ...)`` sorted by port."""

    tags: tuple[tuple[str, str], ...] = ()

    @cached_property
    def by_port(self) -> dict[str, str]:
        return dict(self.tags)

    @staticmethod
    def of(tags: Mapping[str, str]) -> MemState:
        return MemState(tuple(sorted(tags.items())))


@dataclass(frozen=True, order=True)
class TagChange:
    port: str
    before: str | None
    after: str

    def __str__(self) -> str:
        return f"memory {self.port}: {self.before or 'absent'} -> {self.after}"


@dataclass(frozen=True)
class MemoryPlan(FabricPlan):
    fabric = FABRIC
    changes: tuple[TagChange, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.changes

    def lines(self) -> list[str]:
        return [str(c) for c in self.changes]

    def to_dict(self) -> list[dict[str, str | None]]:
        return [{"port": c.port, "before": c.before, "after": c.after} for c in self.changes]

    def split(self) -> tuple[MemoryPlan, MemoryPlan]:
        removals: list[TagChange] = []
        additions: list[TagChange] = []
        for c in self.changes:
            holds = c.before is not None and c.before != QUARANTINE
            if c.after == QUARANTINE:
                (removals if holds else additions).append(c)
            elif holds:
                removals.append(TagChange(c.port, c.before, QUARANTINE))
                additions.append(TagChange(c.port, QUARANTINE, c.after))
            else:
                additions.append(c)
        return MemoryPlan(tuple(removals)), MemoryPlan(tuple(additions))


def node_ports(node: str, ports_per_node: int) -> tuple[str, ...]:
    return tuple(f"{node}/m{i}" for i in range(ports_per_node))


def tenant_of(tag: str) -> str:
    """The tenant a tag gives its port to (``ta@1+2`` -> ``ta``)."""
    return tag.partition("@")[0]


_SHARED: dict[str, dict[str, str]] = {}
_SHARED_LOCK = threading.Lock()


class MemoryBackend(FabricBackend[MemState]):
    """The ``mem-tags`` driver: tags in a dict. ``apply`` returns the ports it set.
    ``shared="name"``: every backend built with that name in this process holds the same tags
    (one "device" that outlives a CLI command, for in-process CLI and API tests)."""

    def __init__(self, shared: str = "", **_options: Any) -> None:
        self._lock = threading.Lock()
        with _SHARED_LOCK:
            self._tags: dict[str, str] = _SHARED.setdefault(shared, {}) if shared else {}
        self.faults = Faults()
        self.applies = 0

    def observe(self) -> MemState:
        with self._lock:
            return MemState.of(self._tags)

    def apply(self, plan: FabricPlan) -> MemState:
        assert isinstance(plan, MemoryPlan)
        self.faults.check(plan)
        with self._lock:
            for c in plan.changes:
                self._tags[c.port] = c.after
            self.applies += 1
            return MemState.of({c.port: self._tags[c.port] for c in plan.changes})

    def set_tag(self, port: str, tag: str) -> None:
        """Change a port out of band (drift injected by a test)."""
        with self._lock:
            self._tags[port] = tag


class MemoryKind(FabricKind[MemState, MemState]):
    name: ClassVar[str] = FABRIC

    def __init__(self, ports_per_node: int = 2, inventory: bool = False) -> None:
        self.ports_per_node = ports_per_node
        self.inventory = inventory
        self.ports_section = inventory  # the generic column, only when asked for

    def build(self, section: Any, drivers: DriverLookup, settings: Mapping[str, Any]) -> FabricBackend[MemState]:
        where = self.instance
        if not isinstance(section, Mapping) or "driver" not in section:
            raise ConfigError(where, section, "a mapping with 'driver' and 'options'")
        cls = drivers(str(section["driver"]))
        if not (isinstance(cls, type) and issubclass(cls, FabricBackend)):
            raise ConfigError(f"{where}.driver", section["driver"], "a memory backend driver (mem-tags)")
        backend: FabricBackend[MemState] = cls(**dict(section.get("options") or {}))
        return backend

    # ---- the generic column (inventory mode)
    def parse_ports(self, node: str, raw: Any, where: str) -> tuple[column.MemPort, ...]:
        return column.parse(node, raw, where)

    def dump_ports(self, ports: tuple[Any, ...]) -> list[Any]:
        return column.dump(ports)

    def port_keys(self, ports: tuple[Any, ...]) -> Iterable[Any]:
        return (p.link for p in ports)

    def allocate(self, network: Network, used: Collection[Segment], config: Any) -> Segment | None:
        return column.allocate(self.instance, used) if self.inventory else None

    def _ports(self, node: Node) -> tuple[str, ...]:
        if not self.inventory:
            return node_ports(node.name, self.ports_per_node)
        return tuple(f"{node.name}/{p.name}" for p in self.ports(node))

    def _tag(self, tenancy: Tenancy, node: str) -> str:
        owner = tenancy.owner(node)
        segs = sorted(s.seg_id for n in tenancy.lease_networks(node) if (s := n.segment(self.instance)))
        return f"{owner}@{'+'.join(map(str, segs))}" if self.inventory and segs else owner

    def desired(self, tenancy: Tenancy) -> MemState:
        return MemState.of({p: self._tag(tenancy, n.name) for n in tenancy.nodes for p in self._ports(n)})

    def diff(self, desired: MemState, observed: MemState) -> MemoryPlan:
        have = observed.by_port
        return MemoryPlan(tuple(TagChange(p, have.get(p), t) for p, t in desired.tags if have.get(p) != t))

    def as_observed(self, desired: MemState) -> MemState:
        return desired

    def empty_state(self) -> MemState:
        return MemState()

    def merge(self, observed: MemState, read_back: MemState) -> MemState:
        return MemState.of({**observed.by_port, **read_back.by_port})

    def tenants_seen(self, observed: MemState, tenancy: Tenancy) -> Mapping[str, frozenset[str]]:
        out: dict[str, set[str]] = {}
        for port, tag in observed.tags:
            out.setdefault(port.rpartition("/")[0], set()).add(tenant_of(tag))
        return {n: frozenset(t) for n, t in out.items()}

    def invariants(self) -> tuple[InvariantSpec, ...]:
        return (InvariantSpec(DRIFT_ID, Severity.HIGH.value, "A memory-fabric port's tag is not the desired one (its node's owner and segments)."),)

    def audit(self, tenancy: Tenancy, desired: MemState, observed: MemState) -> Iterable[Violation]:
        have = observed.by_port
        for port, want in desired.tags:
            got = have.get(port)
            if got != want:
                node = port.rpartition("/")[0]
                tenants = {tenant_of(t) for t in (got, want) if t} - {QUARANTINE}
                yield Violation(DRIFT_ID, Severity.HIGH, f"{port} is tagged {got or 'nothing'}, expected {want}",
                                fabric=self.instance, device=self.instance, port=port, node=node,
                                tenants=tuple(sorted(tenants)))  # fmt: skip

    def summary(self, node: Node, tenancy: Tenancy | None = None) -> str:
        if not self.inventory:
            return ", ".join(node_ports(node.name, self.ports_per_node))
        return column.summary(self.ports(node))

    def node_view(self, node: Node, tenancy: Tenancy | None = None) -> Mapping[str, Any]:
        return column.view(self.ports(node)) if self.inventory else {}
