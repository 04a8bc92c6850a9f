"""A node's fabric columns, in one place: one cell per fabric from each kind's ``summary()``,
the ``fabrics`` object of a node's JSON from each kind's ``node_view()`` and its ``ports``
object from each kind's ``listed_ports()``.

``node list`` (its table and ``--json``), ``GET /api/v1/nodes[/N]`` and the dashboard's
fabric map all take their per-fabric columns from :func:`fabric_cells` (through
:func:`fabric_views`); nothing else names a fabric to draw a node. The JSON of one fabric is
``{"summary": <cell>, **node_view}``: a remote CLI and the dashboard draw the same cells
without loading a fabric package.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpufabric.domain.fabric import FabricKind, Tenancy
from gpufabric.domain.models import Node, Segment
from gpufabric.domain.serial import jsonable
from gpufabric.store.registry import registered_kinds as registered_kinds  # (re-exported: the one cache)

Kinds = Sequence[FabricKind[Any, Any]]


def fabric_cells(node: Node, kinds: Kinds, tenancy: Tenancy | None = None) -> list[tuple[str, str]]:
    """(column, cell) of ``node`` for each fabric instance (the column is the instance's name), in
    the kinds' order: the cell is the kind's
    ``summary()``, one line per resource ("" when the node has none on that fabric)."""
    return [(k.instance, k.summary(node, tenancy)) for k in kinds]


def fabric_views(node: Node, kinds: Kinds, tenancy: Tenancy | None = None) -> dict[str, dict[str, Any]]:
    """The ``fabrics`` object of ``node``'s JSON: column -> ``{"summary": cell, **node_view}``."""
    by_kind = {k.instance: k for k in kinds}
    return {
        column: {"summary": cell, **jsonable(dict(by_kind[column].node_view(node, tenancy)))}
        for column, cell in fabric_cells(node, kinds, tenancy)
    }


def configured_kinds(fabrics_file: Path) -> tuple[FabricKind[Any, Any], ...] | None:
    """The configured fabric instances of ``fabrics_file`` (bound kinds, built-in kinds first),
    or None without one (then every registered kind is a column)."""
    if not fabrics_file.exists():
        return None
    import yaml

    from gpufabric.engine.fabrics import configured_instances
    from gpufabric.store.registry import Registry

    raw = yaml.safe_load(fabrics_file.read_text()) or {}
    kinds = configured_instances(raw, Registry.from_entry_points(drivers=False)).values()  # no driver imported
    return tuple(sorted(kinds, key=lambda k: (k.order, k.instance)))


def view_tenancy(store: Any, nodes: Iterable[Node], now: datetime | None = None) -> Tenancy:
    """Who holds each of ``nodes`` now (active leases) and the offerings: what the cells show."""
    nodes = tuple(nodes)
    names = {n.name for n in nodes}
    leases = {le.node: le for le in store.leases(active_at=now or datetime.now(UTC)) if le.node in names}
    owners = {n.name: leases.get(n.name) for n in nodes}
    return Tenancy(nodes, owners, {}, {o.name: o for o in store.offerings()})


def listed_ports(node: Node, groups: Mapping[str, Sequence[FabricKind[Any, Any]]]) -> dict[str, list[Any]]:
    """The ``ports`` object of ``node``'s JSON: kind -> every port of the node on the kind's
    instances (``groups``: kind -> its instances, :func:`by_kind`; ``FabricKind.listed_ports``;
    kinds that list none left out), in the kinds' order."""
    out: dict[str, list[Any]] = {}
    for name, group in groups.items():
        listed = group[0].listed_ports(node, [k.instance for k in group])
        if listed is not None:
            out[name] = jsonable(list(listed))
    return out


def by_kind(kinds: Kinds) -> dict[str, list[FabricKind[Any, Any]]]:
    """kind -> its instances among ``kinds``, in order."""
    out: dict[str, list[FabricKind[Any, Any]]] = {}
    for k in kinds:
        out.setdefault(k.name, []).append(k)
    return out


def with_segment_views(items: Sequence[Mapping[str, Any]], kinds: Kinds | None = None) -> list[dict[str, Any]]:
    """Network dicts (the API v1 shape) with each segment's ``label`` and its kind's own fields
    (``FabricKind.segment_label``/``segment_view``: e.g. ``vlan``, ``pkey``), by the segment's
    instance among ``kinds`` (default: the registered kinds' default instances); a segment of an
    instance no longer configured keeps its generic fields and its segmentation id as label."""
    by_instance = {k.name: k for k in registered_kinds()} | {k.instance: k for k in kinds or ()}
    out = []
    for net in items:
        segs = []
        for s in net.get("segments") or ():
            kind = by_instance.get(str(s["fabric"]))
            seg = Segment(str(s["fabric"]), int(s["seg_id"]), s.get("key"), s.get("scope") or "",
                          tuple(sorted((s.get("options") or {}).items())))  # fmt: skip
            extra = {**kind.segment_view(seg), "label": kind.segment_label(seg)} if kind is not None else {"label": f"seg {seg.seg_id}"}
            segs.append({**s, **jsonable(dict(extra))})
        out.append({**net, "segments": segs})
    return out


def with_fabrics(items: Sequence[Mapping[str, Any]], store: Any, kinds: Kinds | None = None) -> list[dict[str, Any]]:
    """Node dicts (the API v1 shape, by name) with their ``ports`` and ``fabrics`` objects added.
    One read of the nodes and leases for a page; a single node reads only itself."""
    if not items:
        return []
    kinds = registered_kinds() if kinds is None else kinds
    wanted = {str(i["name"]) for i in items}
    nodes = [store.node(next(iter(wanted)))] if len(wanted) == 1 else [n for n in store.nodes() if n.name in wanted]
    by_name = {n.name: n for n in nodes}
    tenancy = view_tenancy(store, nodes)
    groups = by_kind(kinds)
    return [
        {**i, "ports": listed_ports(n, groups), "fabrics": fabric_views(n, kinds, tenancy)}
        if (n := by_name.get(i["name"])) is not None else dict(i)
        for i in items
    ]
