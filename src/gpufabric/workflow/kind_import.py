"""Inventory import in a fabric kind's format (:meth:`FabricKind.import_formats`, e.g. real
discovery output), one path for ``gpufabric inventory import --format NAME`` on the store and
``POST /api/v1/inventory/{format}`` behind ``serve``: the registered kinds' formats, the fabric
instances of ``fabrics.yaml`` the text's ports are read with, the read, and the answer's
document (the API's body and the CLI's ``--json`` alike). No kind is named."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.hooks import ImportFormat, ImportReport, ImportRequest
from gpufabric.domain.models import Node
from gpufabric.domain.serial import jsonable

if TYPE_CHECKING:
    from gpufabric.domain.auth import Principal
    from gpufabric.store.registry import Registry
    from gpufabric.workflow.actions import Actions


def registered() -> Registry:
    """The registered kinds, no driver imported (what a kind's format is read with)."""
    from gpufabric.store.registry import Registry

    return Registry.from_entry_points(drivers=False)


def kind_formats(registry: Registry | None = None) -> dict[str, ImportFormat]:
    """Every registered kind's import format by name (the kinds load; no driver does)."""
    return {f.name: f for k in (registry or registered()).ordered_kinds() for f in k.import_formats()}


def core_formats() -> dict[str, ImportFormat]:
    """The core's own formats, no kind's: Ironic's listings (``inventory import --from ironic``)."""
    from gpufabric.workflow import ironic_inventory

    return {ironic_inventory.NAME: ironic_inventory.import_format()}


def find(name: str, registry: Registry | None = None) -> ImportFormat:
    """The kind format ``name`` (or the core's); ValidationError naming the registered ones otherwise."""
    found = kind_formats(registry)
    found = found if name in found else {**core_formats(), **found}
    if name not in found:
        raise ValidationError("format", name, " or ".join(sorted(found)) or "a format a fabric kind adds")
    return found[name]


def read(fmt: ImportFormat, text: str, settings: Mapping[str, Any], known: Callable[[], Sequence[Node]],
         instance: str | None = None, strict: bool = False, registry: Registry | None = None,
         confirm: Sequence[str] = ()) -> ImportReport:  # fmt: skip
    """``text`` read in ``fmt`` against the instances ``settings`` (fabrics.yaml's mapping; empty:
    none) configures. ``known`` reads the store's nodes only when the text is not refused first;
    ``confirm``: the held changes the operator confirms (``--confirm``)."""
    instances: dict[str, Any] = {}
    if settings:
        from gpufabric.engine.fabrics import configured_instances

        instances = configured_instances(settings, registry or registered())
    return fmt.read(ImportRequest(text, known, instances, settings, instance, strict, tuple(confirm)))


def imported(actions: Actions, p: Principal, name: str, fmt: ImportFormat, text: str, settings: Mapping[str, Any],
             instance: str | None = None, strict: bool = False, registry: Registry | None = None,
             confirm: Sequence[str] = ()) -> dict[str, Any]:  # fmt: skip
    """``text`` read (:func:`read`) and imported as ``p`` in one unit of work
    (:meth:`Actions.import_read`: the known nodes the read judges are those the write finds), and
    the answer's :func:`document`."""
    report, result = actions.import_read(
        p, lambda known: read(fmt, text, settings, known, instance, strict, registry, confirm), lambda r: r.inventory
    )
    return document(name, report, result)


def document(name: str, report: ImportReport, result: object) -> dict[str, Any]:
    """The import's answer: the format, the nodes written, those held in maintenance (``sm_hosts``:
    the key's name is historical) and why, the store's counts, the format's messages (``ImportReport.lines``, what the CLI prints) and fields,
    and the changes held for an operator's confirmation (``pending``: not written)."""
    held = dict(report.held)
    return {"format": name, "nodes": len(report.inventory.nodes), "sm_hosts": list(held), "held": held,
            "result": jsonable(result), "messages": list(report.lines), "pending": jsonable(list(report.pending)),
            **jsonable(dict(report.fields))}  # fmt: skip
