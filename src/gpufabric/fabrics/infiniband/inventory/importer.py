"""``gpufabric inventory import FILE --format ibnetdiscover``: the InfiniBand kind's own import
format (:meth:`InfinibandKind.import_formats`; the ``gpufabric.import_formats`` entry point
names :func:`import_format`, so the command loads this module and not every kind).

ibnetdiscover's default output (``-p`` output has no CA node GUIDs and is refused) adds HCA
ports to the nodes named by node description ``"HOSTNAME DEVICE"`` (:mod:`ib_match`), on the
IB instance ``--fabric`` (default: the only one); the nodes keep their ports on the other
instances. A description is only a claim (:mod:`ib_claims`): a port GUID the store knows stays
on its node, a skipped CA or a port gone from the fabric removes nothing, and a GUID joining or
changing node, a device renamed or a port recabled is held and reported until ``--confirm``
confirms it. Switches, SHARP aggregation nodes and CAs without a host description are skipped
and reported (``--json``: every node); ``--strict`` refuses the whole file instead when such a
CA has a port the store does not know. A node holding a trusted SM's port
(``sm_port_guids``/``trusted_sm_guids`` of fabrics.yaml) is put in maintenance: never leasable."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.hooks import ImportEntry, ImportFormat, ImportReport, ImportRequest
from gpufabric.domain.models import Inventory, Node, NodeState
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.entries import IbPort, all_ib_ports, with_ib
from gpufabric.fabrics.infiniband.inventory.claims import Claims, Seen, parse_confirm, resolve, seen_ports
from gpufabric.fabrics.infiniband.inventory.match import CaMatch, FabricMatch, import_instance, match_fabric
from gpufabric.fabrics.infiniband.inventory.uplinks import leaf_paths, with_paths
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import DESCRIPTION_ALLOWED, NodeKind, parse_ibnetdiscover

NAME = "ibnetdiscover"
SM_HOST = "holds the trusted SM's port: in maintenance, never leasable"
LISTED = 20  # skipped CAs (and held changes) the text output lists (--json lists every one)


def import_format() -> ImportFormat:
    """The format, as the kind and the entry point give it (a file of any other suffix than
    .yaml/.yml/.json is read as ibnetdiscover output)."""
    return ImportFormat(NAME, read, fallback=True)


def read(req: ImportRequest) -> ImportReport:
    """The HCA ports seen, against the nodes the store knows (:mod:`ib_claims`): known port GUIDs
    stay on their nodes, what a description or the cabling would change is held unless
    ``req.confirm`` confirms it, with every node of the fabric reported."""
    confirm = parse_confirm(req.confirm)
    instance = import_instance(req.instance, req.instances or {})
    topo = parse_ibnetdiscover(req.text)
    m = match_fabric(topo)
    seen = seen_ports(topo, m)
    known = list(req.known())
    if req.strict:
        check_strict(m, seen, known)
    claims = resolve(seen, known, instance, confirm)
    paths = leaf_paths(topo)  # each port's leaf, spines, ... (NCP NET01-01)
    nodes = tuple(with_ib(n, *with_paths(all_ib_ports(n), paths)) for n in claims.nodes)
    inv, held = mark_sm_hosts(Inventory(nodes), sm_guids(req.settings))
    pending = tuple(h.doc() for h in claims.held)
    fields = {"summary": m.counts(), "cas": [_ca_doc(c) for c in m.cas],
              "confirmed": [h.doc() for h in claims.confirmed], "kept": [_kept_doc(q) for q in claims.missing]}
    return ImportReport(
        inv, tuple(_entry(c) for c in m.cas), dict.fromkeys(held, SM_HOST), tuple(_lines(m, claims)), fields, pending
    )  # fmt: skip


def check_strict(m: FabricMatch, seen: Sequence[Seen], known: Sequence[Node]) -> None:
    """``--strict``: ValidationError for the first CA that did not match a host and has a port
    the store does not know (a known port is identified by its GUID, not its description)."""
    stored = {q.port_guid for n in known for q in all_ib_ports(n)}
    of_ca = {s.node_guid for s in seen if s.port_guid not in stored}
    bad = next((c for c in m.cas if c.kind is NodeKind.CA and c.skipped and c.node_guid in of_ca), None)
    if bad is not None:
        raise ValidationError(
            "ib_node_description", bad.description, DESCRIPTION_ALLOWED, f"CA {bad.node_guid}: {bad.reason}"
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


def _kept_doc(q: IbPort) -> dict[str, object]:
    return {"node": q.node, "device": q.device, "port_num": q.port_num, "port_guid": str(q.port_guid)}


def _lines(m: FabricMatch, claims: Claims, limit: int = LISTED) -> list[str]:
    out = ["nodes in the fabric: " + ", ".join(f"{k} {v}" for k, v in m.counts().items())]
    listed = [c for c in m.cas if c.skipped and c.skip not in ("switch", "router", "sharp-aggregation-node")]
    out += [f"skipped CA {c.node_guid} {c.description!r}: {c.reason}" for c in listed[:limit]]
    if len(listed) > limit:
        out.append(f"... {len(listed) - limit} more skipped CAs (--json lists every node)")
    out += [f"confirmed {h.change} of port {h.port_guid}: {h.reason}" for h in claims.confirmed]
    out += [h.line() for h in claims.held[:limit]]
    if len(claims.held) > limit:
        out.append(f"... {len(claims.held) - limit} more held changes (--json lists every one)")
    if claims.held:
        out.append(f"{len(claims.held)} change(s) held, not written: a node description is a claim, not an identity; "
                   "review them and confirm with --confirm PORT_GUID=NODE (or --confirm all)")  # fmt: skip
    if claims.missing:
        q = claims.missing[0]
        out.append(f"{len(claims.missing)} known port(s) not on the fabric, kept (first: {q.port_guid}, node {q.node} "
                   f"{q.device}); a YAML/JSON import removes ports")  # fmt: skip
    return out
