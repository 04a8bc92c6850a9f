"""Building a fabric kind's drivers from its ``fabrics.yaml`` entries: one ``{driver, options}``
entry -> a driver instance of the class the ``gpufabric.drivers`` registry names, with the
deployment's settings injected and every option checked (a ConfigError naming the field)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from gpufabric.domain.errors import ConfigError

DriverLookup = Callable[[str], type]
"""Driver class by name (the ``gpufabric.drivers`` registry)."""


def build_driver(
    drivers: DriverLookup,
    where: str,
    entry: Any,
    extra: Mapping[str, Any],
    optional: Mapping[str, Any] | None = None,
    expect: tuple[type, str] | None = None,
) -> object:
    """A driver instance from a ``{driver, options}`` entry; ``extra`` options are injected
    (a conflicting value in the entry is refused); ``optional`` ones only into drivers
    that take them. ``expect``: (base class, what to call it) the driver must be."""
    if not isinstance(entry, Mapping) or "driver" not in entry:
        raise ConfigError(where, entry, "a mapping with 'driver' and 'options'")
    options = dict(entry.get("options") or {})
    for k, v in extra.items():
        if k in options and str(options[k]) != str(v):
            raise ConfigError(f"{where}.options.{k}", options[k], f"{v} (set once, in config.yaml / fabrics.yaml top level)")
        options[k] = v
    cls = drivers(str(entry["driver"]))
    if expect is not None and not (isinstance(cls, type) and issubclass(cls, expect[0])):
        raise ConfigError(f"{where}.driver", entry.get("driver"), expect[1])
    if optional:
        params = inspect.signature(cls).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        for k, v in optional.items():
            if k in options and str(options[k]) != str(v):
                raise ConfigError(f"{where}.options.{k}", options[k], f"{v} (set once, at the top level)")
            if takes_any or k in params:
                options[k] = v
    try:
        return cls(**options)
    except TypeError as e:
        raise ConfigError(f"{where}.options", entry.get("options"), f"the options of driver {entry['driver']}", str(e)) from None
