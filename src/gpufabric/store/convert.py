"""Row <-> domain conversion for the store. Rows never leave the service layer."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable

from gpufabric.domain.models import (
    EthernetPort,
    FabricPorts,
    IbPort,
    Lease,
    Network,
    Node,
    NodeState,
    Offering,
    Segment,
)
from gpufabric.domain.terms import terms_of
from gpufabric.domain.values import Guid, PKey, VlanId
from gpufabric.store.tables import (
    EthernetPortRow,
    IbPortRow,
    LeaseRow,
    NetworkRow,
    NodeFabricPortsRow,
    NodeRow,
    OfferingRow,
    SegmentRow,
)


def _guid(text: str | None) -> Guid | None:
    return None if text is None else Guid.parse(text)


def ordered(
    ethernet: Iterable[EthernetPort], ib: Iterable[IbPort]
) -> tuple[tuple[EthernetPort, ...], tuple[IbPort, ...]]:
    """A node's typed-table ports in the order the store returns them."""
    return (
        tuple(sorted(ethernet, key=lambda p: p.name)),
        tuple(sorted(ib, key=lambda p: (p.device, p.port_num))),
    )


def canonical(node: Node) -> Node:
    """``node`` with its typed-table and generic-table ports in the order the store returns them."""
    eth, ib = ordered(node.ethernet, node.ib)
    fp = tuple(sorted(node.fabric_ports))
    return dataclasses.replace(node, ethernet=eth, ib=ib, fabric_ports=fp)


def node_to_domain(r: NodeRow) -> Node:
    n = r.name
    return canonical(
        Node(
            name=n,
            offering=r.offering,
            state=NodeState(r.state),
            ethernet=tuple(EthernetPort(n, p.name, p.switch, p.switch_port, p.mac, p.bond, p.bond_mode) for p in r.ethernet),
            ib=tuple(
                IbPort(
                    n,
                    p.device,
                    p.port_num,
                    Guid.parse(p.port_guid),
                    Guid.parse(p.node_guid),
                    _guid(p.switch_guid),
                    p.switch_port,
                    p.instance or "",
                )
                for p in r.ib
            ),
            fabric_ports=tuple(FabricPorts.of(f.instance, f.data) for f in r.fabric_ports),
        )
    )


def fill_node_children(row: NodeRow, node: Node) -> None:
    """Append rows for every port, GPU and DPU of ``node`` to ``row``."""
    row.ethernet.extend(
        EthernetPortRow(name=p.name, switch=p.switch, switch_port=p.switch_port, mac=p.mac, bond=p.bond,
                        bond_mode=p.bond_mode)
        for p in node.ethernet
    )
    row.ib.extend(
        IbPortRow(
            device=p.device,
            port_num=p.port_num,
            port_guid=str(p.port_guid),
            node_guid=str(p.node_guid),
            switch_guid=None if p.switch_guid is None else str(p.switch_guid),
            switch_port=p.switch_port,
            instance=p.instance or None,
        )
        for p in node.ib
    )
    row.fabric_ports.extend(NodeFabricPortsRow(instance=f.instance, data=f.entries) for f in node.fabric_ports)


def segment_row(instance: str, seg: Segment) -> SegmentRow:
    """The row of ``seg`` on the fabric instance ``instance`` (a PKey is stored without its
    membership bit: ``pkey & 0x7FFF``; its options as JSON, NULL when none)."""
    return SegmentRow(
        fabric=instance,
        seg_id=seg.seg_id,
        vlan=seg.vlan.value if seg.vlan else None,
        pkey=seg.pkey.value & 0x7FFF if seg.pkey else None,
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
            None if s.vlan is None else VlanId(s.vlan),
            None if s.pkey is None else PKey(s.pkey),
            segment_options(s.options),
        )
        for s in sorted(r.segments, key=lambda s: s.fabric)
    )
    return Network(r.name, r.tenant.name, segs)


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
