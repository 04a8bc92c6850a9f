"""What a worker derives the desired state from, read in one transaction per converge phase.

A :class:`StoreView` is the nodes, the active leases (and each ended lease whose node no move has
released yet: its node stays with its tenant until its release holds it), the networks, the offerings and the nodes
that moves in flight hold in quarantine — a move holds its node only once its fabrics prepared it
(``before_move`` passed: the OpenShift cordon and drain), so no converge or reconcile repair
quarantines a node ahead of its drain. :class:`ViewReader` reads it together with the fabric
epoch in one transaction, and keeps the slow-changing part — every node's ports, GPUs and DPUs,
the networks with their segments, the offerings — while the inventory revision (``gf_revision``
row 2, bumped by triggers on every write to those tables: migration 0005) stands. Node states
and offerings, leases and open moves are read every time. The revision is read first, so a
write that lands during the read leaves the cache older than its revision, never newer: it is
read again next time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from gpufabric.domain.models import QUARANTINE, Lease, Network, Node, NodeState, Offering
from gpufabric.domain.moves import Move, MovePhase
from gpufabric.store import leases as store_leases
from gpufabric.store.convert import network_to_domain, offering_to_domain
from gpufabric.store.core import Store
from gpufabric.store.move_requests import OPEN
from gpufabric.store.moves import move_to_domain, prepared_ids
from gpufabric.store.nodes import Body, Head, node_bodies, node_from, node_heads
from gpufabric.store.tables import FabricEpochRow, MoveRow, NetworkRow, OfferingRow, RevisionRow
from gpufabric.store.tx import Tx

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


@dataclass(frozen=True)
class _Inventory:
    """One read of the inventory, replaced whole (a reader in another thread sees one or the
    other, never a mix); ``nodes`` memoises each node per head (a benign race: same values)."""

    revision: int | None
    bodies: dict[int, Body]
    networks: tuple[Network, ...]
    offerings: tuple[Offering, ...]
    nodes: dict[int, tuple[Head, Node]] = field(default_factory=dict)

    def node(self, head: Head) -> Node:
        hit = self.nodes.get(head[0])
        if hit is not None and hit[0] == head:
            return hit[1]
        node = node_from(head, self.bodies)
        self.nodes[head[0]] = (head, node)
        return node


class ViewReader:
    """Reads :class:`StoreView` + the fabric epoch, caching the inventory per revision.
    Safe to share between threads (the serve worker, reconcile and API previews)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._inv = _Inventory(None, {}, (), ())
        self.refreshed = 0  # how many reads re-read the inventory (tests check the cache by it)

    def read(self) -> tuple[StoreView, Epoch]:
        with self.store.tx() as tx:
            return self.read_in(tx)

    def read_in(self, tx: Tx) -> tuple[StoreView, Epoch]:
        """:meth:`read` inside the caller's transaction ``tx`` (a swap reads what join needs)."""
        s = tx.session
        now = datetime.now(UTC)
        revision = s.scalar(select(RevisionRow.n).where(RevisionRow.id == INVENTORY_REVISION))
        row = s.get(FabricEpochRow, 1)
        epoch = (row.epoch, row.writer) if row is not None else (0, "")
        heads = node_heads(s)
        inv = self._inv
        if revision is None or revision != inv.revision or any(h[0] not in inv.bodies for h in heads):
            inv = self._inv = self._read_inventory(s, heads, revision)
        leases = store_leases.list_(s, now)
        moves = [move_to_domain(r) for r in s.scalars(select(MoveRow).where(MoveRow.status.in_(OPEN)))]
        leases += _unreleased(s, heads, leases, moves, now)
        ready = prepared_ids(s, [m.id for m in moves if m.phase is MovePhase.QUARANTINE and m.id is not None])
        held = frozenset(m.node for m in moves if m.holds_node_in_quarantine(now, prepared=m.id in ready))
        view = StoreView(tuple(inv.node(h) for h in heads), tuple(leases), inv.networks, held, inv.offerings)
        return view, epoch

    def _read_inventory(self, s: Session, heads: list[Head], revision: int | None) -> _Inventory:
        self.refreshed += 1
        bodies = node_bodies(s, {h[0]: h[1] for h in heads})
        q = select(NetworkRow).options(selectinload(NetworkRow.segments), selectinload(NetworkRow.tenant))
        networks = tuple(network_to_domain(r) for r in s.scalars(q.order_by(NetworkRow.name)))
        offerings = tuple(offering_to_domain(r) for r in s.scalars(select(OfferingRow).order_by(OfferingRow.name)))
        return _Inventory(revision, bodies, networks, offerings)


def _unreleased(s: Session, heads: list[Head], leases: list[Lease], moves: list[Move], now: datetime) -> list[Lease]:
    """The ended lease of each node no move has released from it yet: the node is still marked
    leased (expired, its release not requested yet), or its open move, not past quarantine, leaves
    that lease's tenant. The node stays with that tenant (its pods run there) until its release
    holds it in quarantine, after its drain (:meth:`Move.holds_node_in_quarantine`)."""
    active = {x.node for x in leases}
    moving = {m.node: m for m in moves if m.phase is MovePhase.QUARANTINE and m.from_tenant != QUARANTINE}
    leased = {name for _, name, _, state, _, _ in heads if state == NodeState.LEASED.value and name not in active}
    cand = {nid for nid, name, _, state, _, _ in heads if name in leased or (state == NodeState.MOVING.value
            and name in moving and name not in active)}  # fmt: skip
    return [x for x in store_leases.last_ended(s, cand, now) if x.node in leased or moving[x.node].from_tenant == x.tenant]
