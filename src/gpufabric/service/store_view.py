"""What a worker derives the desired state from, read in one transaction per converge phase.

A :class:`StoreView` is the nodes, the active leases, the networks, the offerings and the nodes
that moves in flight hold in quarantine. :class:`ViewReader` reads it together with the fabric
epoch in one transaction, and keeps the slow-changing part — every node's ports, GPUs and DPUs,
the networks with their segments, the offerings — while the inventory revision (``gf_revision``
row 2, bumped by triggers on every write to those tables: migration 0005) stands. Node states
and offerings, leases and open moves are read every time. The revision is read first, so a
write that lands during the read leaves the cache older than its revision, never newer: it is
read again next time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from gpufabric.domain.models import Lease, Network, Node, NodeState, Offering
from gpufabric.service import store_leases
from gpufabric.service.convert import network_to_domain, offering_to_domain
from gpufabric.service.db_models import FabricEpochRow, MoveRow, NetworkRow, OfferingRow, RevisionRow
from gpufabric.service.move_requests import OPEN
from gpufabric.service.store import Store
from gpufabric.service.store_moves import move_to_domain
from gpufabric.service.store_nodes import Body, Head, node_bodies, node_heads

INVENTORY_REVISION: Final = 2  # the gf_revision row of the inventory (0005)

Epoch = tuple[int, str]


@dataclass(frozen=True)
class StoreView:
    """The store's inputs of the desired state, read once: nodes, active leases, networks,
    offerings, and the nodes that moves in flight hold in quarantine."""

    nodes: tuple[Node, ...]
    leases: tuple[Lease, ...]
    networks: tuple[Network, ...]
    held_in_quarantine: frozenset[str]
    offerings: tuple[Offering, ...] = ()


class ViewReader:
    """Reads :class:`StoreView` + the fabric epoch, caching the inventory per revision."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._revision: int | None = None
        self._bodies: dict[int, Body] = {}
        self._nodes: dict[int, tuple[Head, Node]] = {}
        self._networks: tuple[Network, ...] = ()
        self._offerings: tuple[Offering, ...] = ()
        self.refreshed = 0  # how many reads re-read the inventory (tests check the cache by it)

    def read(self) -> tuple[StoreView, Epoch]:
        with self.store._tx() as s:
            return self.read_in(s)

    def read_in(self, s: Session) -> tuple[StoreView, Epoch]:
        """:meth:`read` inside the caller's transaction ``s`` (a swap reads what join needs)."""
        now = datetime.now(UTC)
        revision = s.scalar(select(RevisionRow.n).where(RevisionRow.id == INVENTORY_REVISION))
        row = s.get(FabricEpochRow, 1)
        epoch = (row.epoch, row.writer) if row is not None else (0, "")
        heads = node_heads(s)
        if revision is None or revision != self._revision or any(h[0] not in self._bodies for h in heads):
            self._refresh(s, heads)
            self._revision = revision
        leases = store_leases.list_(s, now)
        moves = [move_to_domain(r) for r in s.scalars(select(MoveRow).where(MoveRow.status.in_(OPEN)))]
        held = frozenset(m.node for m in moves if m.holds_node_in_quarantine(now))
        view = StoreView(tuple(self._node(h) for h in heads), tuple(leases), self._networks, held, self._offerings)
        return view, epoch

    def _refresh(self, s: Session, heads: list[Head]) -> None:
        self.refreshed += 1
        self._bodies = node_bodies(s, {nid: name for nid, name, _, _ in heads})
        self._nodes = {}
        q = select(NetworkRow).options(selectinload(NetworkRow.segments), selectinload(NetworkRow.tenant))
        self._networks = tuple(network_to_domain(r) for r in s.scalars(q.order_by(NetworkRow.name)))
        self._offerings = tuple(offering_to_domain(r) for r in s.scalars(select(OfferingRow).order_by(OfferingRow.name)))

    def _node(self, head: Head) -> Node:
        hit = self._nodes.get(head[0])
        if hit is not None and hit[0] == head:
            return hit[1]
        nid, name, offering, state = head
        node = Node(name, offering, NodeState(state), *self._bodies[nid])
        self._nodes[nid] = (head, node)
        return node
