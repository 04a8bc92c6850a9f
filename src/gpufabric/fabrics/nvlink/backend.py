"""The NVLink backend: the driver fabrics.yaml's ``nvlink`` section names, built from its options.

An NVLink driver is the backend itself (``drivers/base.py``: observe, apply with verified
read-back, one Fabric Manager session per node), so what this layer owns is the choice:
``{"driver": NAME, "options": {...}}`` looked up among the registered drivers
(``gpufabric.drivers`` entry points), checked to be a backend and constructed from its options,
each refusal one :class:`~gpufabric.domain.errors.ConfigError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.fabric import DriverLookup, FabricBackend
from gpufabric.fabrics.nvlink.state import NvlinkState


def build_backend(section: Any, drivers: DriverLookup) -> FabricBackend[NvlinkState]:
    """The backend of ``section`` (``nvlink``, ``nvlink.driver`` or ``nvlink.options`` named
    when it is not a mapping with a driver, names no backend, or has options the driver refuses)."""
    if not isinstance(section, Mapping) or "driver" not in section:
        raise ConfigError("nvlink", section, "a mapping with 'driver' and 'options'")
    cls = drivers(str(section["driver"]))
    if not (isinstance(cls, type) and issubclass(cls, FabricBackend)):
        raise ConfigError("nvlink.driver", section["driver"], "an NVLink backend driver (e.g. fmpm)")
    options = section.get("options") or {}
    if not isinstance(options, Mapping):
        raise ConfigError("nvlink.options", options, "a mapping of driver options")
    try:
        backend: FabricBackend[NvlinkState] = cls(**options)
    except TypeError as e:
        raise ConfigError(
            "nvlink.options", dict(options), f"the options of driver {section['driver']}", str(e)
        ) from None
    return backend
