"""The fabrics a deployment drives: one backend per configured fabric, built from
``fabrics.yaml`` by the registered fabric kinds, observed and applied in parallel (one
thread per fabric; inside a fabric, one per device).

``fabrics.yaml`` (written by ``gpufabric lab up`` for the lab; by hand for a site) has one
top-level key per fabric (its kind's section format) plus the SM facts::

    ethernet:
      - {driver: ovsdb, options: {switch: leaf-1, remote: "unix:/run/ovs/db.sock"}}
    infiniband:
      driver: opensm
      options: {...}
    sm_port_guids: ["0x..."]      # full members of the default partition
    trusted_sm_guids: ["0x..."]   # the only SMs allowed on the subnet (default: sm_port_guids)

Each fact has one source: the quarantine VLAN comes from ``config.yaml`` (``settings``), the
trusted SM GUIDs from the top level here; both are handed to the drivers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpufabric.domain.drivers import EthernetSwitchDriver, SubnetManagerDriver
from gpufabric.domain.errors import ConfigError
from gpufabric.domain.fabric import FabricBackend, FabricKind, Tenancy
from gpufabric.domain.moves import Move
from gpufabric.domain.parallel import run_parallel
from gpufabric.domain.state import FabricState
from gpufabric.domain.values import Guid
from gpufabric.planning.plan import Plan
from gpufabric.service.registry import Registry

TOP_LEVEL = ("sm_port_guids", "trusted_sm_guids")


@dataclass
class Fabrics:
    kinds: dict[str, FabricKind[Any, Any]] = field(default_factory=dict)
    backends: dict[str, FabricBackend[Any]] = field(default_factory=dict)
    sm_port_guids: tuple[Guid, ...] = ()
    trusted_sm_guids: tuple[Guid, ...] = ()
    quarantine_vlan: int = 4000

    @classmethod
    def from_config(cls, raw: Mapping[str, Any], registry: Registry, quarantine_vlan: int = 4000) -> Fabrics:
        if not isinstance(raw, Mapping):
            raise ConfigError("fabrics", raw, "a mapping of fabric name to its section")
        guids = tuple(Guid.parse(g, field="sm_port_guids") for g in raw.get("sm_port_guids", []) or [])
        trusted = tuple(Guid.parse(g, field="trusted_sm_guids") for g in raw.get("trusted_sm_guids", []) or [])
        f = cls(sm_port_guids=guids or trusted, trusted_sm_guids=trusted or guids, quarantine_vlan=quarantine_vlan)
        known = ", ".join([*sorted(registry.kinds), *TOP_LEVEL])
        for name in raw:
            if name not in TOP_LEVEL and name not in registry.kinds:
                raise ConfigError(f"fabrics.{name}", name, f"a registered fabric or setting: {known}")
        for kind in registry.ordered_kinds():
            if raw.get(kind.name):
                f.backends[kind.name] = kind.build(raw[kind.name], registry.get, f.settings)
                f.kinds[kind.name] = kind
        return f

    @classmethod
    def load(cls, path: Path, registry: Registry, quarantine_vlan: int = 4000) -> Fabrics:
        if not path.exists():
            raise ConfigError("fabrics", str(path), "a fabrics.yaml (run `gpufabric lab up` or write one)")
        return cls.from_config(yaml.safe_load(path.read_text()) or {}, registry, quarantine_vlan)

    @property
    def settings(self) -> dict[str, Any]:
        """Deployment-wide facts fabric kinds derive from (one source each)."""
        return {
            "quarantine_vlan": self.quarantine_vlan,
            "sm_port_guids": self.sm_port_guids,
            "trusted_sm_guids": self.trusted_sm_guids,
        }

    def kind_list(self) -> list[FabricKind[Any, Any]]:
        return list(self.kinds.values())

    # ---- built-in fabrics, by role (reconcile's rogue-SM containment, CLI tables)
    @property
    def switches(self) -> dict[str, EthernetSwitchDriver]:
        b = self.backends.get("ethernet")
        return dict(getattr(b, "switches", {})) if b is not None else {}

    @property
    def sm(self) -> SubnetManagerDriver | None:
        b = self.backends.get("infiniband")
        sm = getattr(b, "sm", None) if b is not None else None
        return sm if isinstance(sm, SubnetManagerDriver) else None

    # ---- I/O
    def observe(self) -> FabricState:
        """Read every fabric in parallel."""
        return FabricState(slices=run_parallel({n: b.observe for n, b in self.backends.items()}))

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

    def before_move(self, tenancy: Tenancy, moves: Sequence[Move]) -> None:
        """Every fabric's checks and preparations before a batch's quarantine (in order)."""
        for b in self.backends.values():
            b.before_move(tenancy, moves)

    def after_join(self, tenancy: Tenancy, moves: Sequence[Move]) -> None:
        for b in self.backends.values():
            b.after_join(tenancy, moves)

    def close(self) -> None:
        for b in self.backends.values():
            b.close()
