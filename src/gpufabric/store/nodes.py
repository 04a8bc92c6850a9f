"""Reading every node with its ports in two plain SELECTs (SQLAlchemy Core rows, no ORM identity
map): what a worker reads before each converge phase. The result is exactly
``[node_to_domain(row) for row in ...]`` over the ORM rows, sorted by name — at about a tenth of
the cost for a thousand nodes. Heads (id, name, offering, state) and bodies (every kind's
entries) are read apart, so that a warm worker can keep the bodies while the inventory revision
stands (:mod:`gpufabric.store.view`)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpufabric.domain.models import FabricPorts, Node, NodeState
from gpufabric.store.fabric_ports import read_fabric_ports
from gpufabric.store.tables import NodeRow

Body = tuple[FabricPorts, ...]
"""A node's ports, one per fabric instance, in the order the store returns them."""
Head = tuple[int, str, str, str, str, tuple[int, ...]]
"""A node's id, name, offering, state, host and slot modules (a slot's: issue 33)."""


def list_nodes(s: Session, lock: bool = False) -> list[Node]:
    heads = node_heads(s, lock)
    return nodes_from(heads, node_bodies(s, {h[0]: h[1] for h in heads}))


def node_heads(s: Session, lock: bool = False) -> list[Head]:
    """Every node's :data:`Head`, by name; ``lock``: the rows locked until the transaction ends
    (``FOR UPDATE`` where the database has it)."""
    q = select(NodeRow.id, NodeRow.name, NodeRow.offering, NodeRow.state, NodeRow.host, NodeRow.slot_modules)
    q = q.order_by(NodeRow.name)
    if lock:
        q = q.with_for_update(of=NodeRow)
    return [(nid, name, offering, state, host or "", tuple(mods or ())) for nid, name, offering, state, host, mods in s.execute(q)]


def nodes_from(heads: list[Head], bodies: dict[int, Body]) -> list[Node]:
    return [node_from(h, bodies) for h in heads]


def node_from(head: Head, bodies: dict[int, Body]) -> Node:
    nid, name, offering, state, host, mods = head
    return Node(name, offering, NodeState(state), bodies.get(nid, ()), host, mods)


def node_bodies(s: Session, names: dict[int, str]) -> dict[int, Body]:
    """The ports of the nodes ``names`` (id -> name) in one SELECT."""
    return read_fabric_ports(s, names)
