"""The registry: fabric kinds (``gpufabric.fabrics`` entry points) and their drivers
(``gpufabric.drivers`` entry points).

A :class:`Registry` is an ordinary object (no module globals): the service builds one at
start-up and asks it for a driver class or the fabric kinds by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.metadata import entry_points
from types import MappingProxyType
from typing import Any

from gpufabric.domain.errors import ConfigError, NotFoundError
from gpufabric.domain.fabric import FabricKind
from gpufabric.domain.segments import SegmentConfig
from gpufabric.domain.terms import TermSpec, declared_terms

GROUP = "gpufabric.drivers"
KINDS_GROUP = "gpufabric.fabrics"


@dataclass
class Registry:
    drivers: dict[str, type] = field(default_factory=dict)
    kinds: dict[str, FabricKind[Any, Any]] = field(default_factory=dict)

    @classmethod
    def from_entry_points(cls, group: str = GROUP, kinds_group: str = KINDS_GROUP, *, drivers: bool = True) -> Registry:
        """Every registered kind and driver; ``drivers=False``: the kinds alone (no driver module
        imported: enough to read which instances fabrics.yaml configures)."""
        reg = cls()
        for ep in entry_points(group=group) if drivers else ():
            reg.drivers[ep.name] = ep.load()
        for ep in entry_points(group=kinds_group):
            reg.register_kind(ep.load()())
        return reg

    def register(self, name: str, driver: type) -> None:
        self.drivers[name] = driver

    def register_kind(self, kind: FabricKind[Any, Any]) -> None:
        if not isinstance(kind, FabricKind):
            raise ConfigError("gpufabric.fabrics", repr(kind), "a FabricKind subclass")
        self.kinds[kind.name] = kind

    def get(self, name: str) -> type:
        try:
            return self.drivers[name]
        except KeyError:
            raise NotFoundError("driver", f"{name} (known: {', '.join(sorted(self.drivers)) or 'none'})") from None

    def kind(self, name: str) -> FabricKind[Any, Any]:
        try:
            return self.kinds[name]
        except KeyError:
            raise NotFoundError("fabric", f"{name} (known: {', '.join(sorted(self.kinds)) or 'none'})") from None

    def ordered_kinds(self) -> list[FabricKind[Any, Any]]:
        """Every registered kind, in a stable order: each kind's ``order``, then its name."""
        return sorted(self.kinds.values(), key=lambda k: (k.order, k.name))


@lru_cache(maxsize=1)
def registered_kinds() -> tuple[FabricKind[Any, Any], ...]:
    """Every kind of the ``gpufabric.fabrics`` entry points, in the registry's order, loaded once
    per process (no driver imported): the one source for whoever needs the kinds unconfigured."""
    return tuple(Registry.from_entry_points(drivers=False).ordered_kinds())


def parse_segments(raw: Any = None) -> SegmentConfig:
    """config.yaml's ``segments:`` (``raw``; None: every default) split among the registered
    kinds (:func:`registered_kinds`), each parsing its own section."""
    return SegmentConfig.from_dict(raw, registered_kinds())


@lru_cache(maxsize=1)
def registered_terms() -> tuple[TermSpec, ...]:
    """Every lease term the registered kinds declare (``FabricKind.lease_terms``), by name: the
    fields of the API's move and lease bodies and answers, and what the store accepts."""
    return declared_terms(registered_kinds())


@lru_cache(maxsize=1)
def registered_offering_fields() -> Mapping[str, str]:
    """The offering settings the registered kinds show as an offering's fields, with their
    value when unset (``FabricKind.offering_settings``); a key two kinds declare is a ConfigError."""
    out: dict[str, str] = {}
    owner: dict[str, str] = {}
    for k in registered_kinds():
        for key, unset in k.offering_settings.items():
            if owner.setdefault(key, k.name) != k.name:
                raise ConfigError(f"{k.name}.offering_settings", key, f"a key no other kind declares ({owner[key]} does)")
            out[key] = unset
    return MappingProxyType(out)
