"""Inventory import in a fabric kind's format (:meth:`FabricKind.import_formats`, e.g. real
discovery output), one path for ``gpufabric inventory import --format NAME`` on the store and
``POST /api/v1/inventory/{format}`` behind ``serve``: the registered kinds' formats, the fabric
instances of ``fabrics.yaml`` the text's ports are read with, and the read. No kind is named."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.hooks import ImportFormat, ImportReport, ImportRequest
from gpufabric.domain.models import Node


def kind_formats() -> dict[str, ImportFormat]:
    """Every registered kind's import format by name (the kinds load; no driver does)."""
    from gpufabric.store.registry import Registry

    kinds = Registry.from_entry_points(drivers=False).ordered_kinds()
    return {f.name: f for k in kinds for f in k.import_formats()}


def find(name: str) -> ImportFormat:
    """The kind format ``name``; ValidationError naming the registered ones otherwise."""
    found = kind_formats()
    if name not in found:
        raise ValidationError("format", name, " or ".join(sorted(found)) or "a format a fabric kind adds")
    return found[name]


def read(fmt: ImportFormat, text: str, settings: Mapping[str, Any], known: Callable[[], Sequence[Node]],
         instance: str | None = None, strict: bool = False) -> ImportReport:  # fmt: skip
    """``text`` read in ``fmt`` against the instances ``settings`` (fabrics.yaml's mapping; empty:
    none) configures. ``known`` reads the store's nodes only when the text is not refused first."""
    instances: dict[str, Any] = {}
    if settings:
        from gpufabric.engine.fabrics import configured_instances
        from gpufabric.store.registry import Registry

        instances = configured_instances(settings, Registry.from_entry_points(drivers=False))
    return fmt.read(ImportRequest(text, known, instances, settings, instance, strict))
