"""The port table of every fabric kind (``node_fabric_ports``: one row per node and fabric
instance, the kind's validated entries as JSON) — read in one SELECT (:mod:`gpufabric.store.nodes`) —
and its keys (``node_port_keys``): who holds a key, and the port lookup by key. Rows are written
with the node (``convert.fill_node_children``) and replaced with it on import."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpufabric.domain.models import FabricPorts
from gpufabric.store.tables import NodeFabricPortsRow, NodePortKeyRow, NodeRow


def read_fabric_ports(s: Session, ids: set[int] | dict[int, str]) -> dict[int, tuple[FabricPorts, ...]]:
    """node id -> its generic-table ports (sorted by instance), for the nodes ``ids``."""
    out: dict[int, list[FabricPorts]] = defaultdict(list)
    q = select(NodeFabricPortsRow.node_id, NodeFabricPortsRow.instance, NodeFabricPortsRow.data)
    for nid, instance, data in s.execute(q):
        if nid in ids:
            out[nid].append(FabricPorts.of(instance, data))
    return {nid: tuple(sorted(ports)) for nid, ports in out.items()}


def key_holders(s: Session, keys: Iterable[tuple[str, str]], but: Iterable[str] = ()) -> dict[tuple[str, str], str]:
    """(scope, key) -> the name of the node that holds it, for those of ``keys`` held by a node
    not named in ``but``."""
    wanted = set(keys)
    if not wanted:
        return {}
    skip = set(but)
    q = select(NodePortKeyRow.scope, NodePortKeyRow.key, NodeRow.name).join(NodeRow, NodeRow.id == NodePortKeyRow.node_id)
    scopes = {scope for scope, _ in wanted}
    return {(scope, key): name for scope, key, name in s.execute(q.where(NodePortKeyRow.scope.in_(scopes)))
            if (scope, key) in wanted and name not in skip}  # fmt: skip
