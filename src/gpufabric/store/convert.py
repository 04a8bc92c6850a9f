"""Row <-> domain conversion for the store. Rows never leave the service layer."""

from __future__ import annotations

import dataclasses
import json

from gpufabric.domain.models import FabricPorts, Lease, Network, Node, NodeState, Offering, Segment
from gpufabric.domain.terms import terms_of
from gpufabric.store.tables import (
    LeaseRow,
    NetworkRow,
    NodeFabricPortsRow,
    NodePortKeyRow,
    NodeRow,
    OfferingRow,
    SegmentRow,
)


def canonical(node: Node) -> Node:
    """``node`` with its ports in the order the store returns them (by instance)."""
    return dataclasses.replace(node, fabric_ports=tuple(sorted(node.fabric_ports)))


def node_to_domain(r: NodeRow) -> Node:
    return canonical(
        Node(
            name=r.name,
            offering=r.offering,
            state=NodeState(r.state),
            fabric_ports=tuple(FabricPorts.of(f.instance, f.data) for f in r.fabric_ports),
            host=r.host or "",
            slot_modules=tuple(r.slot_modules or ()),
        )
    )


def fill_node_children(row: NodeRow, node: Node) -> None:
    """Append the rows of every port of ``node`` to ``row``: its entries per instance and the
    keys they hold (a key once per node)."""
    row.fabric_ports.extend(NodeFabricPortsRow(instance=f.instance, data=f.entries) for f in node.fabric_ports)
    keys = {(k.scope, k.key) for f in node.fabric_ports for k in f.keys}
    row.port_keys.extend(NodePortKeyRow(scope=scope, key=key) for scope, key in sorted(keys))


def segment_row(instance: str, seg: Segment) -> SegmentRow:
    """The row of ``seg`` on the fabric instance ``instance`` (its options as JSON, NULL when none)."""
    return SegmentRow(
        fabric=instance,
        seg_id=seg.seg_id,
        scope=seg.scope or None if seg.key is not None else None,
        key=seg.key,
        options=json.dumps(dict(seg.options), sort_keys=True) if seg.options else None,
    )


def segment_options(raw: str | None) -> tuple[tuple[str, int | bool], ...]:
    """A segment row's ``options`` column as :attr:`Segment.options` (sorted by key)."""
    return tuple(sorted(json.loads(raw).items())) if raw else ()


def network_to_domain(r: NetworkRow) -> Network:
    segs = tuple(
        Segment(
            s.fabric,
            s.seg_id,
            s.key,
            s.scope or "",
            segment_options(s.options),
        )
        for s in sorted(r.segments, key=lambda s: s.fabric)
    )
    return Network(r.name, r.tenant.name, segs, r.description or "", tuple(r.tags or ()))


def offering_to_domain(r: OfferingRow) -> Offering:
    return Offering(r.name, r.description, tuple((k, v) for k, v in r.settings))


def lease_to_domain(r: LeaseRow) -> Lease:
    return Lease(
        tenant=r.tenant.name,
        node=r.node.name,
        start=r.start,
        end=r.end,
        networks=tuple(sorted(ln.network.name for ln in r.networks)),
        offering=r.offering,
        owner=r.owner,
        id=r.id,
        terms=terms_of(r.terms),
    )
