"""The fabrics a deployment drives: one backend per configured fabric *instance*, built from
``fabrics.yaml`` by the registered fabric kinds, observed and applied in parallel (one
thread per instance; inside an instance, one per device).

``fabrics.yaml`` (written by ``gpufabric lab up`` for the lab; by hand for a site) lists the
named instances, each of a kind, with that kind's section (under ``section``, or inline
beside ``name``/``kind`` when the section is a mapping), plus the kinds' own top-level keys
(``FabricKind.top_level``: deployment-wide facts, e.g. the InfiniBand kind's SM GUIDs)::

    fabrics:
      - {name: ib-compute, kind: infiniband, driver: opensm, options: {...}}
      - {name: eth, kind: ethernet, section: [{driver: ovsdb, options: {switch: leaf-1, ...}}]}
    sm_port_guids: ["0x..."]      # full members of the default partition
    trusted_sm_guids: ["0x..."]   # the only SMs allowed on the subnet (default: sm_port_guids)

Today's form, one top-level key per kind (``ethernet: [...]``, ``infiniband: {...}``), keeps
working: each is migrated on load to one instance named after its kind (``Fabrics.notes``
says so; the log too). Instance names are unique; a kind's default instance is named after the
kind, as stored segments and ports name it.

Each fact has one source: what the kinds' sections of ``config.yaml``'s ``segments:`` set (e.g.
the quarantine VLAN, ``SegmentConfig.settings``) comes from there, what their top-level keys
here set from here (``FabricKind.deployment_settings``); both reach the kinds as ``settings``
(their builds hand them to the drivers).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.fabric import FabricBackend, FabricKind, Tenancy
from gpufabric.domain.models import Node
from gpufabric.domain.moves import Move
from gpufabric.domain.segments import SegmentConfig
from gpufabric.domain.state import FabricState
from gpufabric.domain.values import check_name
from gpufabric.planning.plan import Plan
from gpufabric.store.registry import Registry
from gpufabric.transport.parallel import run_parallel

INSTANCES = "fabrics"
log = logging.getLogger(__name__)


@dataclass
class Fabrics:
    kinds: dict[str, FabricKind[Any, Any]] = field(default_factory=dict)  # instance -> its bound kind
    backends: dict[str, FabricBackend[Any]] = field(default_factory=dict)  # instance -> its backend
    top: Mapping[str, Any] = field(default_factory=dict)  # the settings of the kinds' top-level keys
    segments: SegmentConfig | None = None  # config.yaml's segments: (None: every kind's defaults)
    notes: tuple[str, ...] = ()  # one line per legacy section migrated on load

    @classmethod
    def from_config(
        cls,
        raw: Mapping[str, Any],
        registry: Registry,
        segments: SegmentConfig | None = None,
    ) -> Fabrics:
        """The instances of ``raw`` built; ``segments`` (config.yaml's pools) is what instances'
        own pools are checked against (None: only against each other) and what the kinds'
        settings come from (None: each kind's own defaults)."""
        if not isinstance(raw, Mapping):
            raise ConfigError("fabrics", raw, "a mapping with a 'fabrics' list of instances and the kinds' settings")
        top: dict[str, Any] = {}
        for k in registry.ordered_kinds():
            top.update(k.deployment_settings(raw))
        f = cls(top=top, segments=segments)
        specs, notes = checked_specs(raw, registry, segments)
        f.notes = tuple(notes)
        for line in notes:
            log.info("%s", line)
        order = {k.name: i for i, k in enumerate(registry.ordered_kinds())}
        for _pos, name, kind, section in sorted(specs, key=lambda x: (order[x[2].name], x[0])):
            bound = kind.bind(name, section)
            f.backends[name] = bound.build(section, registry.get, f.settings)
            f.kinds[name] = bound
        return f

    @classmethod
    def load(
        cls,
        path: Path,
        registry: Registry,
        segments: SegmentConfig | None = None,
    ) -> Fabrics:
        if not path.exists():
            raise ConfigError("fabrics", str(path), "a fabrics.yaml (run `gpufabric lab up` or write one)")
        return cls.from_config(yaml.safe_load(path.read_text()) or {}, registry, segments)

    @property
    def settings(self) -> dict[str, Any]:
        """Deployment-wide facts fabric kinds derive from (one source each): those of the kinds'
        ``segments:`` sections (``SegmentConfig.settings``) and of their top-level keys here."""
        return {**(self.segments.settings() if self.segments is not None else {}), **self.top}

    def kind_list(self) -> list[FabricKind[Any, Any]]:
        """Every configured instance's bound kind, in the engine's order."""
        return list(self.kinds.values())

    def instances_of(self, kind: str) -> list[str]:
        """The configured instances of ``kind``, in order."""
        return [n for n, k in self.kinds.items() if k.name == kind]

    # ---- a node's columns (API ``fabrics.<instance>``, node table cells), keyed by instance
    def node_views(self, node: Node) -> dict[str, Mapping[str, Any]]:
        """instance -> its kind's JSON fragment of ``node`` (instances with nothing to say left out)."""
        return {name: view for name, k in self.kinds.items() if (view := k.node_view(node))}

    def summaries(self, node: Node) -> dict[str, str]:
        """instance -> its kind's table cell of ``node`` (every instance, in order)."""
        return {name: k.summary(node) for name, k in self.kinds.items()}

    # ---- I/O
    def observe(self, audit: bool = True) -> FabricState:
        """Read every fabric in parallel; ``audit=False`` (a move): what only the audit needs is not
        read (:meth:`FabricBackend.observe_for_moves`)."""
        read = {n: b.observe if audit else b.observe_for_moves for n, b in self.backends.items()}
        return FabricState(slices=run_parallel(read))

    def apply(
        self, plan: Plan, on_done: Callable[[str, float], None] | None = None
    ) -> tuple[dict[str, Any], dict[str, float]]:
        """Apply every fabric's part of ``plan`` in parallel. Returns each fabric's verified
        read-back and seconds per fabric; raises the first error after all have finished."""
        todo = plan.nonempty()
        for name in todo:
            if name not in self.backends:
                raise ConfigError("fabrics", name, f"a {name} section in fabrics.yaml")
        timings: dict[str, float] = {}

        def job(name: str) -> Callable[[], Any]:
            def run() -> Any:
                t0 = time.monotonic()
                try:
                    return self.backends[name].apply(todo[name])
                finally:
                    timings[name] = time.monotonic() - t0
                    if on_done:
                        on_done(name, timings[name])

            return run

        return run_parallel({n: job(n) for n in todo}), timings

    def before_move(self, tenancy: Callable[[], Tenancy], moves: Sequence[Move]) -> None:
        """Every fabric's checks and preparations before a batch's quarantine (in order), given
        ``tenancy()``: the owners before the move, read once and only when a fabric has the hook."""
        self._each("before_move", tenancy, moves)

    def after_join(self, tenancy: Callable[[], Tenancy], moves: Sequence[Move]) -> None:
        """Every fabric's steps after a batch's join is verified, given ``tenancy()`` (the new owners)."""
        self._each("after_join", tenancy, moves)

    def _each(self, hook: str, tenancy: Callable[[], Tenancy], moves: Sequence[Move]) -> None:
        default = getattr(FabricBackend, hook)
        calls = [f for b in self.backends.values() if getattr(f := getattr(b, hook), "__func__", None) is not default]
        if calls:  # no fabric overrides the hook (the default does nothing): the store is not read for it
            owners = tenancy()
            for f in calls:
                f(owners, moves)

    def close(self) -> None:
        for b in self.backends.values():
            b.close()


Spec = tuple[int, str, FabricKind[Any, Any], Any]
"""(position in the file, instance name, kind, the kind's section)."""


def instance_specs(raw: Mapping[str, Any], registry: Registry) -> tuple[list[Spec], list[str]]:
    """The instances ``fabrics.yaml`` configures (its ``fabrics`` list, then each legacy
    top-level kind section as one instance named after the kind) and a note per migrated
    section. ConfigError naming the field: unknown key or kind, bad or duplicate name."""
    kinds = ", ".join(sorted(registry.kinds))
    top = top_level(registry)
    known = ", ".join([INSTANCES, *sorted(registry.kinds), *sorted(top)])
    specs: list[Spec] = []
    notes: list[str] = []
    seen: dict[str, str] = {}
    entries = raw.get(INSTANCES) or []
    if not isinstance(entries, list):
        raise ConfigError(INSTANCES, entries, "a list of {name, kind, ...section} instances")
    for i, entry in enumerate(entries):
        where = f"{INSTANCES}[{i}]"
        if not isinstance(entry, Mapping):
            raise ConfigError(where, entry, "a mapping with name, kind and the kind's section")
        kind_name = entry.get("kind")
        if kind_name not in registry.kinds:
            raise ConfigError(f"{where}.kind", kind_name, f"a registered fabric kind: {kinds}")
        name = entry.get("name", kind_name)
        try:
            check_name(f"{where}.name", name)
        except ValidationError as e:
            raise ConfigError(e.field, e.value, e.allowed) from None
        rest = {k: v for k, v in entry.items() if k not in ("name", "kind")}
        section = rest["section"] if set(rest) == {"section"} else rest
        _add(specs, seen, i, str(name), registry.kinds[str(kind_name)], section, f"{where}.name")
    for j, (key, value) in enumerate(raw.items()):
        if key in top or key == INSTANCES:
            continue
        if key not in registry.kinds:
            raise ConfigError(f"fabrics.{key}", key, f"a registered fabric or setting: {known}")
        if value:
            _add(specs, seen, len(entries) + j, key, registry.kinds[key], value, f"fabrics.{key}")
            notes.append(f"fabrics.yaml: top-level '{key}:' read as the instance {key} of kind {key}"
                         f" (the new form: fabrics: [{{name: {key}, kind: {key}, ...}}])")  # fmt: skip
    return specs, notes


def top_level(registry: Registry) -> frozenset[str]:
    """The top-level keys of ``fabrics.yaml`` the registered kinds read (``FabricKind.top_level``)."""
    return frozenset().union(*(k.top_level for k in registry.kinds.values()))


def _add(specs: list[Spec], seen: dict[str, str], pos: int, name: str, kind: FabricKind[Any, Any], section: Any, where: str) -> None:
    if name in seen:
        raise ConfigError(where, name, f"unique instance names (also at {seen[name]})", "duplicate")
    seen[name] = where
    specs.append((pos, name, kind, section))


def checked_specs(
    raw: Mapping[str, Any], registry: Registry, segments: SegmentConfig | None
) -> tuple[list[Spec], list[str]]:
    """:func:`instance_specs`, then each kind's check of its instances side by side (one SM
    written twice, overlapping per-instance pools; against ``segments`` when given)."""
    specs, notes = instance_specs(raw, registry)
    for kind_name, kind in registry.kinds.items():
        if mine := {name: section for _pos, name, k, section in specs if k.name == kind_name}:
            kind.check_instances(mine, segments)
    return specs, notes


def configured_instances(raw: Mapping[str, Any], registry: Registry) -> dict[str, FabricKind[Any, Any]]:
    """instance -> bound kind (with its section) of every instance ``fabrics.yaml`` configures,
    with no backend built (what the inventory import needs to parse the instances' port sections)."""
    return {name: kind.bind(name, section) for _pos, name, kind, section in instance_specs(raw, registry)[0]}


def network_kinds(
    raw: Mapping[str, Any], registry: Registry, segments: SegmentConfig | None = None
) -> list[FabricKind[Any, Any]]:
    """The fabric instances a new network takes its segments from: every configured instance,
    and the default instance of each registered kind with none configured (as before instances),
    in the registry's order. The instances are checked side by side first (:func:`checked_specs`):
    an overlapping pool is a ConfigError before any segment is allocated from it."""
    checked_specs(raw, registry, segments)
    configured = list(configured_instances(raw, registry).values())
    named = {k.name for k in configured}
    order = {k.name: i for i, k in enumerate(registry.ordered_kinds())}
    kinds = [*configured, *(k for k in registry.ordered_kinds() if k.name not in named)]
    return sorted(kinds, key=lambda k: (order.get(k.name, len(order)), k.instance))
