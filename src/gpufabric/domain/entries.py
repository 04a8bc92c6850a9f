"""The checks every inventory entry gets, and the errors they give: one source for the core's
inventory reader (:mod:`gpufabric.workflow.inventory`) and each fabric kind's own entries (e.g.
``fabrics/dpu/entries.py``), so a bad entry reads the same whoever parses it."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from gpufabric.domain.errors import ValidationError


def short(raw: Any) -> Any:
    """``raw`` as an error shows it: as is, or its repr cut to 60 characters."""
    text = repr(raw)
    return raw if len(text) <= 60 else text[:57] + "..."


def mapping(path: str, raw: Any, keys: Collection[str]) -> Mapping[str, Any]:
    """``raw`` at ``path``: a mapping with known ``keys`` only (the top level's keys are named bare)."""
    if not isinstance(raw, Mapping):
        raise ValidationError(path, short(raw), f"a mapping with keys {', '.join(sorted(keys))}")
    prefix = "" if path == "inventory" else f"{path}."
    for k in raw:
        if k not in keys:
            raise ValidationError(f"{prefix}{k}", short(raw[k]), f"known keys only: {', '.join(sorted(keys))}")
    return raw


def listed(path: str, raw: Any) -> list[Any]:
    """``raw`` at ``path``: a list."""
    if not isinstance(raw, list):
        raise ValidationError(path, short(raw), "a list")
    return raw


def required(path: str, m: Mapping[str, Any], key: str) -> Any:
    """``m[key]``, refused at ``path.key`` when missing or null."""
    if m.get(key) is None:
        raise ValidationError(f"{path}.{key}", None, "a value (required)", "missing")
    return m[key]
