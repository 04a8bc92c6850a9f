"""The checks every inventory entry gets, and the errors they give: one source for the core's
inventory reader (:mod:`gpufabric.workflow.inventory`) and each fabric kind's own entries (e.g.
``fabrics/dpu/entries/``), so a bad entry reads the same whoever parses it; and a node's
stored entries of a kind, parsed once (:func:`node_entries`, behind ``FabricKind.ports``)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from functools import lru_cache
from typing import Any, TypeVar

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.models import FabricPorts, Node


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


T = TypeVar("T")


def text(path: str, raw: Any, allowed: str) -> str:
    """``raw`` at ``path``: a non-empty string (stripped); ``allowed`` says what it names."""
    if not isinstance(raw, str) or not raw.strip():
        raise ValidationError(path, raw, f"a non-empty string: {allowed}")
    return raw.strip()


def checked(path: str, raw: Any, fn: Callable[[], T]) -> T:
    """Run a domain check; re-raise its error under ``path`` with the raw value."""
    try:
        return fn()
    except ValidationError as e:
        raise ValidationError(path, raw, e.allowed) from None


def unique(first: dict[tuple[str, Any], str], key: tuple[str, Any], path: str, value: Any, what: str) -> None:
    """Refuse ``key`` at ``path`` when ``first`` holds it (naming where), else record it there."""
    if key in first:
        raise ValidationError(path, value, f"unique {what} (also at {first[key]})", "duplicate")
    first[key] = path


Parse = Callable[[str, Any, str], tuple[Any, ...]]
"""A kind's entry parser: (node, raw entries, where) -> immutable port values (``parse_ports``)."""


def node_entries(node: Node, instance: str, parse: Parse, default: str | None = None) -> tuple[Any, ...]:
    """``node``'s generic-table entries on ``instance``, read by ``parse`` once per distinct entry;
    a node with none there has those of ``default`` (a kind's default instance: its
    ``inventory_key``'s entries, which every instance of the kind saw before instances)."""
    found = node.ports_on(instance) or (node.ports_on(default) if default and default != instance else None)
    return () if found is None else _parsed(parse, node.name, found)


@lru_cache(maxsize=1 << 16)
def _parsed(parse: Parse, node: str, found: FabricPorts) -> tuple[Any, ...]:
    return parse(node, found.entries, f"{node}.fabrics.{found.instance}")
