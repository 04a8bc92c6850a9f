"""The driver registry: fabric drivers found through the ``gpufabric.drivers`` entry points.

A :class:`Registry` is an ordinary object (no module globals): the service builds one at
start-up and asks it for a driver class by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import entry_points

from gpufabric.domain.errors import NotFoundError

GROUP = "gpufabric.drivers"


@dataclass
class Registry:
    drivers: dict[str, type] = field(default_factory=dict)

    @classmethod
    def from_entry_points(cls, group: str = GROUP) -> Registry:
        reg = cls()
        for ep in entry_points(group=group):
            reg.drivers[ep.name] = ep.load()
        return reg

    def register(self, name: str, driver: type) -> None:
        self.drivers[name] = driver

    def get(self, name: str) -> type:
        try:
            return self.drivers[name]
        except KeyError:
            raise NotFoundError("driver", f"{name} (known: {', '.join(sorted(self.drivers)) or 'none'})") from None
