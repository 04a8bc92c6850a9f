"""The fabrics a deployment drives: driver instances built from ``fabrics.yaml`` through the
registry, observed and applied in parallel (one thread per fabric, one transaction per switch).

``fabrics.yaml`` (written by ``gpufabric lab up`` for the lab; by hand for a site)::

    ethernet:
      - {driver: ovsdb, options: {switch: leaf-1, remote: "unix:/run/ovs/db.sock"}}
    infiniband:
      driver: opensm
      options: {...}
    sm_port_guids: ["0x..."]      # full members of the default partition
    trusted_sm_guids: ["0x..."]   # the only SMs allowed on the subnet (default: sm_port_guids)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpufabric.domain.drivers import EthernetSwitchDriver, SubnetManagerDriver
from gpufabric.domain.errors import ConfigError, GpufabricError
from gpufabric.domain.state import FabricState, IbFabricState
from gpufabric.domain.values import Guid
from gpufabric.planning.plan import Plan
from gpufabric.service.registry import Registry


@dataclass
class Fabrics:
    switches: dict[str, EthernetSwitchDriver] = field(default_factory=dict)
    sm: SubnetManagerDriver | None = None
    sm_port_guids: tuple[Guid, ...] = ()
    trusted_sm_guids: tuple[Guid, ...] = ()

    @classmethod
    def from_config(cls, raw: Mapping[str, Any], registry: Registry) -> Fabrics:
        switches: dict[str, EthernetSwitchDriver] = {}
        for i, entry in enumerate(raw.get("ethernet", []) or []):
            drv = _build(registry, f"ethernet[{i}]", entry)
            if not isinstance(drv, EthernetSwitchDriver):
                raise ConfigError(f"ethernet[{i}].driver", entry.get("driver"), "an Ethernet switch driver")
            switches[drv.switch] = drv
        sm = None
        if raw.get("infiniband"):
            sm_drv = _build(registry, "infiniband", raw["infiniband"])
            if not isinstance(sm_drv, SubnetManagerDriver):
                raise ConfigError("infiniband.driver", raw["infiniband"].get("driver"), "a subnet manager driver")
            sm = sm_drv
        guids = tuple(Guid.parse(g, field="sm_port_guids") for g in raw.get("sm_port_guids", []) or [])
        trusted = tuple(Guid.parse(g, field="trusted_sm_guids") for g in raw.get("trusted_sm_guids", []) or [])
        return cls(switches, sm, guids, trusted or guids)

    @classmethod
    def load(cls, path: Path, registry: Registry) -> Fabrics:
        if not path.exists():
            raise ConfigError("fabrics", str(path), "a fabrics.yaml (run `gpufabric lab up` or write one)")
        return cls.from_config(yaml.safe_load(path.read_text()) or {}, registry)

    def observe(self) -> FabricState:
        """Read every fabric in parallel."""
        with ThreadPoolExecutor(max_workers=max(1, len(self.switches) + 1)) as pool:
            sw_f = {name: pool.submit(d.observe) for name, d in self.switches.items()}
            ib_f = pool.submit(self.sm.observe) if self.sm else None
            switches = tuple(f.result() for _, f in sorted(sw_f.items()))
            ib = ib_f.result() if ib_f else IbFabricState()
        return FabricState(switches=switches, ib=ib)

    def apply(self, plan: Plan, on_done: Callable[[str, float], None] | None = None) -> dict[str, float]:
        """Apply a plan: every switch (one transaction each) and the SM (one sweep) in parallel.
        Returns seconds per device; raises the first error after all have finished."""
        jobs: dict[str, Callable[[], None]] = {}
        for switch, ports in plan.switches().items():
            drv = self.switches.get(switch)
            if drv is None:
                raise ConfigError("switch", switch, f"a switch in fabrics.yaml ({', '.join(sorted(self.switches))})")
            jobs[f"ethernet:{switch}"] = lambda d=drv, p=ports: d.apply(p)  # type: ignore[misc]
        if plan.ib and plan.ib_layout is not None:
            if self.sm is None:
                raise ConfigError("infiniband", "none", "an infiniband driver in fabrics.yaml")
            sm, layout = self.sm, plan.ib_layout
            jobs["infiniband:sm"] = lambda: sm.apply(layout)
        timings: dict[str, float] = {}
        errors: list[GpufabricError] = []

        def timed(name: str, job: Callable[[], None]) -> None:
            t0 = time.monotonic()
            try:
                job()
            finally:
                timings[name] = time.monotonic() - t0
                if on_done:
                    on_done(name, timings[name])

        with ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:
            futures = [pool.submit(timed, n, j) for n, j in jobs.items()]
            for f in futures:
                exc = f.exception()
                if isinstance(exc, GpufabricError):
                    errors.append(exc)
                elif exc is not None:
                    raise exc
        if errors:
            raise errors[0]
        return timings


def _build(registry: Registry, where: str, entry: Any) -> object:
    if not isinstance(entry, Mapping) or "driver" not in entry:
        raise ConfigError(where, entry, "a mapping with 'driver' and 'options'")
    cls = registry.get(str(entry["driver"]))
    try:
        return cls(**(entry.get("options") or {}))
    except TypeError as e:
        raise ConfigError(
            f"{where}.options", entry.get("options"), f"the options of driver {entry['driver']}", str(e)
        ) from None
