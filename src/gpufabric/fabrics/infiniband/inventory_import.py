"""``gpufabric inventory import FILE --format ibnetdiscover``: the InfiniBand kind's own import
format (:meth:`InfinibandKind.import_formats`; the ``gpufabric.import_formats`` entry point
names :func:`import_format`, so the command loads this module and not every kind).

ibnetdiscover's default output (``-p`` output has no CA node GUIDs and is refused) adds HCA
ports to the nodes matched by node description ``"HOSTNAME DEVICE"`` (:mod:`ib_match`), on the
IB instance ``--fabric`` (default: the only one); the nodes keep their ports on the other
instances. Switches, SHARP aggregation nodes and CAs without a host description are skipped and
reported (``--json``: every node); ``--strict`` refuses the whole file instead. An import never
moves a port GUID the store knows to another node (node descriptions are set by root on a
host), and a node holding a trusted SM's port (``sm_port_guids``/``trusted_sm_guids`` of
fabrics.yaml) is put in maintenance: never leasable."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.hooks import ImportEntry, ImportFormat, ImportReport, ImportRequest
from gpufabric.domain.models import Inventory, Node, NodeState
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.entries import IbPort, all_ib_ports, with_ib
from gpufabric.fabrics.infiniband.ib_match import (
    CaMatch,
    FabricMatch,
    import_instance,
    match_fabric,
    on_instance,
    ports_off,
)
from gpufabric.fabrics.infiniband.ibnetdiscover import NodeKind, parse_ibnetdiscover
from gpufabric.fabrics.infiniband.uplinks import leaf_paths, with_paths

NAME = "ibnetdiscover"
SM_HOST = "holds the trusted SM's port: in maintenance, never leasable"
LISTED = 20  # skipped CAs the text output lists (--json lists every node)
Kept = Callable[[Node], tuple[Any, ...]]


def import_format() -> ImportFormat:
    """The format, as the kind and the entry point give it (a file of any other suffix than
    .yaml/.yml/.json is read as ibnetdiscover output)."""
    return ImportFormat(NAME, read, fallback=True)


def read(req: ImportRequest) -> ImportReport:
    """The matched HCA ports merged into the known nodes, with every node of the fabric."""
    found, m, kept = match_text(req.text, strict=req.strict, subnet=req.instance, instances=req.instances)
    known = list(req.known())
    check_guid_moves(found, known)
    inv, held = mark_sm_hosts(merge_ib_ports(known, found, kept), sm_guids(req.settings))
    return ImportReport(
        inv, tuple(_entry(c) for c in m.cas), dict.fromkeys(held, SM_HOST), tuple(_lines(m)),
        {"summary": m.counts(), "cas": [_ca_doc(c) for c in m.cas]},
    )  # fmt: skip


def match_text(
    text: str, *, strict: bool = True, subnet: str | None = None, instances: Mapping[str, Any] | None = None
) -> tuple[Inventory, FabricMatch, Kept]:
    """The nodes (with their IB ports) matched in an ibnetdiscover output, the match of every
    node of the fabric, and what a node keeps of its known ports (those on other instances).
    The ports are assigned to the IB instance ``subnet`` of ``instances`` (default: the only
    one; ValidationError naming ``--fabric`` for an unknown one). ``strict``: a CA that does not
    match is a ValidationError."""
    instance = import_instance(subnet, instances or {})
    topo = parse_ibnetdiscover(text)
    m = match_fabric(topo)
    ports = with_paths(m.strict_ports() if strict else m.ports, leaf_paths(topo))  # each port's leaf, spines, ...
    by_node: dict[str, list[IbPort]] = {}
    for p in ports:
        by_node.setdefault(p.node, []).append(on_instance(p, instance))
    nodes = tuple(with_ib(Node(name), *by_node[name]) for name in sorted(by_node))
    return Inventory(nodes), m, lambda node: ports_off(node, instance)


def merge_ib_ports(existing: Iterable[Node], ib_inventory: Inventory, kept: Kept | None = None) -> Inventory:
    """Attach IB ports found on the fabric to the known nodes, keeping their other ports (and
    ``kept(node)``: their HCA ports on the other IB instances, one subnet being imported at a time)."""
    by_name = {n.name: n for n in existing}
    merged = []
    for found in ib_inventory.nodes:
        old = by_name.get(found.name)
        keep = () if old is None or kept is None else kept(old)
        merged.append(with_ib(old, *keep, *all_ib_ports(found)) if old else found)
    return Inventory(tuple(merged))


def check_guid_moves(found: Inventory, known: Iterable[Node]) -> None:
    """Refuse an import (ibnetdiscover: names come from node descriptions, which root on a
    host can rewrite) that would give a port GUID the store knows to another node."""
    owner = {q.port_guid: n.name for n in known for q in all_ib_ports(n)}
    for n in found.nodes:
        for q in all_ib_ports(n):
            was = owner.get(q.port_guid)
            if was is not None and was != n.name:
                raise ValidationError(
                    "ib_node_description",
                    f"{n.name} {q.device}",
                    f"port GUID {q.port_guid} stays on node {was} (node descriptions are not trusted to move a known GUID)",
                    f"would move port GUID {q.port_guid} from node {was} to {n.name}",
                )


def mark_sm_hosts(inv: Inventory, sm_guids: Iterable[Guid]) -> tuple[Inventory, tuple[str, ...]]:
    """Nodes holding a trusted SM's port GUID are the SM host: never leasable (maintenance)."""
    sm = frozenset(sm_guids)
    hosts = tuple(sorted(n.name for n in inv.nodes if any(q.port_guid in sm for q in all_ib_ports(n))))
    nodes = tuple(dataclasses.replace(n, state=NodeState.MAINTENANCE) if n.name in hosts else n for n in inv.nodes)
    return Inventory(nodes), hosts


def sm_guids(fabrics_yaml: Mapping[str, Any]) -> list[Guid]:
    """The trusted SMs' port GUIDs of a fabrics.yaml mapping (``sm_port_guids``, ``trusted_sm_guids``)."""
    raw = [*(fabrics_yaml.get("sm_port_guids") or []), *(fabrics_yaml.get("trusted_sm_guids") or [])]
    return [Guid.parse(g, field="sm_port_guids") for g in raw]


def _entry(c: CaMatch) -> ImportEntry:
    label = f"{'CA' if c.kind is NodeKind.CA else c.kind.value} {c.node_guid} {c.description!r}"
    return ImportEntry(label, _ca_doc(c), c.host if not c.skipped else None, c.ports, c.skip, c.reason)


def _ca_doc(c: CaMatch) -> dict[str, object]:
    doc: dict[str, object] = {"kind": c.kind.value, "node_guid": str(c.node_guid) if c.node_guid else None,
                              "description": c.description}  # fmt: skip
    if c.skipped:
        return {**doc, "status": "skipped", "skip": c.skip, "reason": c.reason}
    return {**doc, "status": "matched", "host": c.host, "device": c.device, "ports": c.ports}


def _lines(m: FabricMatch, limit: int = LISTED) -> list[str]:
    out = ["nodes in the fabric: " + ", ".join(f"{k} {v}" for k, v in m.counts().items())]
    listed = [c for c in m.cas if c.skipped and c.skip not in ("switch", "router", "sharp-aggregation-node")]
    out += [f"skipped CA {c.node_guid} {c.description!r}: {c.reason}" for c in listed[:limit]]
    if len(listed) > limit:
        out.append(f"... {len(listed) - limit} more skipped CAs (--json lists every node)")
    return out
