"""The port table of every fabric kind (``node_fabric_ports``: one row per node and fabric
instance, the kind's validated entries as JSON) — read in one SELECT (:mod:`gpufabric.store.nodes`) —
and its keys (``node_port_keys``). Rows are written with the node (``convert.fill_node_children``)
and replaced with it on import."""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpufabric.domain.models import FabricPorts
from gpufabric.store.tables import NodeFabricPortsRow


def read_fabric_ports(s: Session, ids: set[int] | dict[int, str]) -> dict[int, tuple[FabricPorts, ...]]:
    """node id -> its generic-table ports (sorted by instance), for the nodes ``ids``."""
    out: dict[int, list[FabricPorts]] = defaultdict(list)
    q = select(NodeFabricPortsRow.node_id, NodeFabricPortsRow.instance, NodeFabricPortsRow.data)
    for nid, instance, data in s.execute(q):
        if nid in ids:
            out[nid].append(FabricPorts.of(instance, data))
    return {nid: tuple(sorted(ports)) for nid, ports in out.items()}

