"""The store: durable inventory, tenants, networks, offerings and leases.

Owns persistence of the domain through SQLAlchemy 2 on SQLite or PostgreSQL. Every
public method runs in one transaction, takes and returns DOMAIN objects (never ORM
rows) and raises domain errors: NotFoundError, ConflictError, ValidationError,
ExhaustedError. Uniqueness that isolation depends on (switch ports, port GUIDs,
VLANs, PKeys) is enforced by database constraints; allocations retry when another
replica won a race. Leases live in :mod:`gpufabric.store.leases`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from sqlalchemy import Engine, delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload, sessionmaker

from gpufabric.domain.errors import ConflictError, NotFoundError
from gpufabric.domain.models import (
    BUILTIN_OFFERINGS,
    Inventory,
    Lease,
    Network,
    NetworkOptions,
    Node,
    NodeState,
    Offering,
    PortKey,
    Segment,
    Tenant,
    lease_not_over,
)
from gpufabric.domain.segments import SegmentConfig
from gpufabric.domain.values import check_name
from gpufabric.store import db, host_ids
from gpufabric.store import leases as store_leases
from gpufabric.store.convert import (
    canonical,
    fill_node_children,
    network_to_domain,
    node_to_domain,
    offering_to_domain,
    segment_row,
)
from gpufabric.store.nodes import list_nodes
from gpufabric.store.registry import Registry
from gpufabric.store.tables import (
    LeaseNetworkRow,
    LeaseRow,
    NetworkRow,
    NodeRow,
    OfferingRow,
    SegmentRow,
    TenantRow,
)
from gpufabric.store.tx import Tx

ALLOCATION_ATTEMPTS: Final = 50
_NODE_LOAD: Final = (selectinload(NodeRow.fabric_ports),)


@dataclass(frozen=True)
class ImportResult:
    """What an inventory upsert did, counted in nodes."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0

    def __str__(self) -> str:  # what a person reads (never the dataclass repr)
        return f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged"


def sibling_instances(kind: Any, kinds: Sequence[Any]) -> set[str]:
    """The instances sharing ``kind``'s pool (its kind's, and the default): VLANs and PKeys are
    unique deployment-wide."""
    return {k.instance for k in kinds if k.name == kind.name} | {kind.name, kind.instance}


def used_segments(s: Session) -> list[Segment]:
    """Every network's segments (the pools' used ids)."""
    rows = s.execute(select(SegmentRow.fabric, SegmentRow.seg_id, SegmentRow.key, SegmentRow.scope)).all()
    return [Segment(u.fabric, u.seg_id, u.key, u.scope or "") for u in rows]


class Store:
    """Persistence of the domain. Open with :meth:`open`; close with :meth:`close`."""

    def __init__(self, engine: Engine, url: str) -> None:
        self.url = url
        self._engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(cls, url: str | None = None, home: Path | None = None) -> Store:
        """Open (and migrate to head) the store at ``url``, else ``$GPUFABRIC_DB``,
        else ``sqlite:///<home>/gpufabric.db`` (home: ``$GPUFABRIC_HOME`` or ``./.gpufabric``)."""
        resolved = db.resolve_url(url, home)
        engine = db.make_engine(resolved)
        try:
            db.upgrade(engine)
            store = cls(engine, resolved)
            store._seed_offerings()
        except BaseException:
            engine.dispose()
            raise
        return store

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for the store's own modules: the fabric lock's connection, read-only readers)."""
        return self._engine

    @contextmanager
    def tx(self, within: Tx | None = None, durable: bool = True) -> Iterator[Tx]:
        """The unit of work: ``with store.tx() as tx:`` is one transaction (see :mod:`.unit_of_work`);
        ``within``: the caller's open transaction, joined (a step composed into the caller's work).
        ``durable=False``: on SQLite, its commit is not fsynced (it is by the next durable one: :data:`.db.RELAXED`)."""
        if within is not None:
            yield within
            return
        token = None if durable else db.RELAXED.set(True)
        try:
            with self._sessions.begin() as s:
                if token is not None:
                    s.connection()  # begun now, while relaxed
                    db.RELAXED.reset(token)
                    token = None
                yield Tx(s)
        finally:
            if token is not None:
                db.RELAXED.reset(token)

    @contextmanager
    def _tx(self) -> Iterator[Session]:
        with self._sessions.begin() as s:
            yield s

    def _seed_offerings(self) -> None:
        rows: list[dict[str, object]] = [
            {"name": o.name, "description": o.description, "settings": [list(kv) for kv in o.settings]}
            for o in BUILTIN_OFFERINGS
        ]
        with self._tx() as s:
            ins = (postgresql.insert if s.get_bind().dialect.name == "postgresql" else sqlite.insert)(OfferingRow)
            s.execute(ins.values(rows).on_conflict_do_nothing(index_elements=["name"]))

    # ------------------------------------------------------------------ inventory
    def upsert_inventory(self, inv: Inventory, within: Tx | None = None) -> ImportResult:
        """Add new nodes and replace the ports/offering of known ones (and write ``inv.host_ids``), in one
        transaction (``within``: the caller's, e.g. the one its :meth:`nodes` were read in); states kept, others alone.

        Raises ConflictError (and writes nothing) when a port key (a switch port, a port GUID, ...:
        ``FabricKind.port_keys``) is held by another node or by two in ``inv``, or when a node that is leased or moving would
        change: its ports are in a tenant, and rewriting them in place (or handing one to another
        listed node) would let the next converge pass a port from one tenant to another directly.
        """
        added = updated = unchanged = 0
        try:
            with self.tx(within) as t:
                s = t.session
                q = select(NodeRow).options(*_NODE_LOAD, selectinload(NodeRow.port_keys)).with_for_update()
                rows = {r.name: r for r in s.scalars(q)}
                _check_claims(inv, rows)
                changed: list[tuple[NodeRow, Node]] = []
                for node in inv.nodes:
                    row = rows.get(node.name)
                    if row is None:
                        row = NodeRow(name=node.name, offering=node.offering, state=node.state.value,
                                      host=node.host, slot_modules=list(node.slot_modules))  # fmt: skip
                        changed.append((row, node))
                        s.add(row)
                        added += 1
                        continue
                    current = node_to_domain(row)
                    if node.state is NodeState.MAINTENANCE and current.state is NodeState.AVAILABLE:
                        row.state = NodeState.MAINTENANCE.value  # e.g. found to be the SM host: never leasable
                    if canonical(dataclasses.replace(node, state=current.state)) == current:
                        unchanged += 1
                        continue
                    if current.state in (NodeState.LEASED, NodeState.MOVING):
                        same_ports = dataclasses.replace(node, state=current.state, offering=current.offering)
                        if canonical(same_ports) == current:  # the offering is the lease's now: kept
                            unchanged += 1
                            continue
                        raise ConflictError(
                            f"node {node.name} is {current.state.value}: its ports change only while it is in"
                            " quarantine (end its lease or move it to quarantine first)",
                            node=node.name, state=current.state.value,
                        )  # fmt: skip
                    row.offering = node.offering
                    row.fabric_ports.clear()
                    row.port_keys.clear()
                    changed.append((row, node))
                    updated += 1
                s.flush()  # delete every replaced child first: a port may move between nodes
                for row, node in changed:
                    fill_node_children(row, node)
                host_ids.write_host_ids(s, {**rows, **{r.name: r for r, _ in changed}}, inv.host_ids)
        except IntegrityError as e:
            raise ConflictError(f"inventory conflicts with the store: {e.orig}", detail=str(e.orig)) from e
        return ImportResult(added, updated, unchanged)

    def nodes(self, tx: Tx | None = None, lock: bool = False) -> list[Node]:
        """Every node; ``lock``: in ``tx``, held until it ends (PostgreSQL: ``SELECT ... FOR
        UPDATE`` of the node rows; SQLite: its ``BEGIN IMMEDIATE`` holds the write lock already)."""
        with self.tx(tx) as t:
            return list_nodes(t.session, lock)

    def node(self, name: str, tx: Tx | None = None) -> Node:
        with self.tx(tx) as t:
            return node_to_domain(_node_row(t.session, name))

    def set_node_state(self, name: str, state: NodeState) -> Node:
        state = NodeState(state)
        with self._tx() as s:
            row = _node_row(s, name)
            row.state = state.value
            return node_to_domain(row)

    # ------------------------------------------------------------------ tenants
    def create_tenant(self, name: str) -> Tenant:
        tenant = Tenant(name)
        try:
            with self._tx() as s:
                if s.scalar(select(TenantRow.id).where(TenantRow.name == name)) is not None:
                    raise ConflictError(f"tenant already exists: {name}", tenant=name)
                s.add(TenantRow(name=name))
        except IntegrityError as e:
            raise ConflictError(f"tenant already exists: {name}", tenant=name) from e
        return tenant

    def tenants(self) -> list[Tenant]:
        with self._tx() as s:
            return [Tenant(n) for n in s.scalars(select(TenantRow.name).order_by(TenantRow.name))]

    def tenant(self, name: str) -> Tenant:
        with self._tx() as s:
            return Tenant(_tenant_row(s, name).name)

    # ------------------------------------------------------------------ networks
    def create_network(self, name: str, tenant: str, cfg: SegmentConfig, kinds: Sequence[Any] | None = None,
                       fabrics: Collection[str] | None = None, options: NetworkOptions | None = None,
                       tx: Tx | None = None, about: Network | None = None) -> Network:  # fmt: skip
        """A tenant network with one segment per spanned instance whose kind allocates one
        (``FabricKind.allocate``). ``kinds``: the configured instances (default: every registered
        kind); ``fabrics``: those it spans (None: all; ids stay unique across every instance of
        ``kinds`` sharing a pool); ``options``: instance -> its segment's validated options.
        ``tx``: the caller's transaction (its quota checked there), each attempt a savepoint of it;
        ``about``: the network's own description and tags (validated as a :class:`Network`).
        Raises NotFoundError (tenant), ConflictError (name taken), ExhaustedError (pool empty).
        """
        check_name("network.name", name)
        allocators = list(kinds) if kinds is not None else Registry.from_entry_points().ordered_kinds()
        last: IntegrityError | None = None
        for _ in range(ALLOCATION_ATTEMPTS):
            try:
                if tx is not None:  # an id taken by another replica: back to the savepoint, retried on fresh data
                    with tx.session.begin_nested():
                        return self._create_network(tx.session, name, tenant, cfg, allocators, fabrics, options or {}, about)
                with self._tx() as s:
                    return self._create_network(s, name, tenant, cfg, allocators, fabrics, options or {}, about)
            except IntegrityError as e:  # another replica took the same id (or name): retry on fresh data
                last = e
        raise ConflictError(
            f"could not allocate segments for network {name} in {ALLOCATION_ATTEMPTS} attempts: {last}", network=name
        )

    @staticmethod
    def _create_network(
        s: Session, name: str, tenant: str, cfg: SegmentConfig, kinds: Sequence[Any], fabrics: Collection[str] | None,
        options: NetworkOptions, about: Network | None = None,
    ) -> Network:  # fmt: skip
        t = _tenant_row(s, tenant)
        if s.scalar(select(NetworkRow.id).where(NetworkRow.name == name, NetworkRow.tenant_id == t.id)) is not None:
            raise ConflictError(f"network already exists in tenant {tenant}: {name}", network=name, tenant=tenant)
        used = used_segments(s)
        row = network_row(name, t, about)
        probe = Network(name, tenant)
        fresh: list[Segment] = []  # this network's segments so far (its kind's pool is shared by the instances)
        for kind in kinds:  # one segment per spanned fabric instance (kind.instance) whose kind allocates
            if fabrics is not None and kind.instance not in fabrics:
                continue  # not spanned (its ids still count: ``used`` holds every sibling's)
            siblings = sibling_instances(kind, kinds)
            seg = kind.allocate(probe, [x for x in (*used, *fresh) if x.fabric in siblings], cfg)
            if seg is not None:
                fresh.append(dataclasses.replace(seg, fabric=kind.instance))
                row.segments.append(segment_row(kind.instance, dataclasses.replace(seg, options=options.get(kind.instance, ()))))
        s.add(row)
        s.flush()
        return network_to_domain(row)

    def networks(self, tenant: str | None = None) -> list[Network]:
        with self._tx() as s:
            q = select(NetworkRow).options(selectinload(NetworkRow.segments), selectinload(NetworkRow.tenant))
            if tenant is not None:
                q = q.where(NetworkRow.tenant_id == _tenant_row(s, tenant).id)
            return [network_to_domain(r) for r in s.scalars(q.order_by(NetworkRow.name))]

    def network(self, name: str, tenant: str) -> Network:
        """The network ``name`` of ``tenant`` (names are unique per tenant only)."""
        with self._tx() as s:
            return network_to_domain(_network_row(s, name, tenant))

    def delete_network(self, name: str, tenant: str) -> Network:
        """Delete a network and release its segments. ConflictError while leases use it (naming them)."""
        with self._tx() as s:
            row = _network_row(s, name, tenant)
            links = s.execute(
                select(LeaseNetworkRow.lease_id, LeaseRow.end)
                .join(LeaseRow, LeaseRow.id == LeaseNetworkRow.lease_id)
                .where(LeaseNetworkRow.network_id == row.id)
            ).all()
            now = datetime.now(UTC)
            ids = sorted(i for i, end in links if lease_not_over(end, now))
            if not ids and links:  # only ended leases name it: they keep their history without it
                s.execute(delete(LeaseNetworkRow).where(LeaseNetworkRow.network_id == row.id))
            if ids:
                raise ConflictError(
                    f"network {name} of tenant {tenant} is used by lease(s) {', '.join(map(str, ids))}",
                    network=name,
                    leases=ids,
                )
            net = network_to_domain(row)
            s.delete(row)
            return net

    # ------------------------------------------------------------------ offerings
    def offerings(self) -> list[Offering]:
        with self._tx() as s:
            return [offering_to_domain(r) for r in s.scalars(select(OfferingRow).order_by(OfferingRow.name))]

    def create_offering(self, o: Offering) -> Offering:
        try:
            with self._tx() as s:
                if s.scalar(select(OfferingRow.id).where(OfferingRow.name == o.name)) is not None:
                    raise ConflictError(f"offering already exists: {o.name}", offering=o.name)
                row = OfferingRow(
                    name=o.name,
                    description=o.description,
                    settings=[list(kv) for kv in o.settings],
                )
                s.add(row)
                s.flush()
                return offering_to_domain(row)
        except IntegrityError as e:
            raise ConflictError(f"offering already exists: {o.name}", offering=o.name) from e

    # ------------------------------------------------------------------ leases
    def create_lease(self, lease: Lease) -> Lease:
        """Store ``lease`` (its id must be unset) and return it with its id. The node,
        tenant, offering and networks must exist and the networks belong to the tenant.
        ConflictError when the node has a lease overlapping [start, end)."""
        with self._tx() as s:
            return store_leases.create(s, lease)

    def lease(self, lease_id: int) -> Lease:
        with self._tx() as s:
            return store_leases.get(s, lease_id)

    def leases(self, active_at: datetime | None = None) -> list[Lease]:
        """All leases by start time, or only those active at ``active_at`` (timezone-aware)."""
        with self._tx() as s:
            return store_leases.list_(s, active_at)

    def delete_lease(self, lease_id: int) -> Lease:
        with self._tx() as s:
            return store_leases.delete(s, lease_id)


# ---------------------------------------------------------------------- helpers
def _node_row(s: Session, name: str) -> NodeRow:
    row = s.scalar(select(NodeRow).options(*_NODE_LOAD).where(NodeRow.name == name))
    if row is None:
        raise NotFoundError("node", name)
    return row


def _tenant_row(s: Session, name: str) -> TenantRow:
    row = s.scalar(select(TenantRow).where(TenantRow.name == name))
    if row is None:
        raise NotFoundError("tenant", name)
    return row


def network_row(name: str, tenant: TenantRow, about: Network | None) -> NetworkRow:
    """A new network's row: ``about``'s description and tags (None: none)."""
    return NetworkRow(name=name, tenant=tenant, description=about.description if about else "",
                      tags=list(about.tags) if about else [])  # fmt: skip


def _network_row(s: Session, name: str, tenant: str) -> NetworkRow:
    q = (
        select(NetworkRow)
        .join(TenantRow, NetworkRow.tenant_id == TenantRow.id)
        .options(selectinload(NetworkRow.segments), selectinload(NetworkRow.tenant))
        .where(NetworkRow.name == name, TenantRow.name == tenant)
    )
    row = s.scalar(q)
    if row is None:
        raise NotFoundError("network", f"{tenant}/{name}")
    return row


def _check_claims(inv: Inventory, rows: dict[str, NodeRow]) -> None:
    """Raise ConflictError for a node listed twice in ``inv``, or a port key that ``inv`` gives
    to a node while another node has it (in the store — ``rows``, their keys loaded — but not in
    ``inv``, or earlier in ``inv``): before the database's own constraint would, naming the key
    and its holder."""
    mine = {n.name for n in inv.nodes}
    held = {(k.scope, k.key): r.name for r in rows.values() if r.name not in mine for k in r.port_keys}
    first: dict[tuple[str, str], str] = {}
    wanted: list[tuple[str, PortKey]] = []
    seen: set[str] = set()
    for n in inv.nodes:
        if n.name in seen:
            raise ConflictError(f"node {n.name} is listed twice in the inventory", node=n.name)
        seen.add(n.name)
        for k in (k for f in n.fabric_ports for k in f.keys):
            owner = first.setdefault((k.scope, k.key), n.name)
            if owner != n.name:
                raise _taken(n.name, k, owner)
            wanted.append((n.name, k))
    for name, k in wanted:
        if (holder := held.get((k.scope, k.key))) is not None:
            raise _taken(name, k, holder)


def _taken(node: str, k: PortKey, owner: str) -> ConflictError:
    return ConflictError(f"{k.label or f'{k.scope} {k.key}'} already belongs to node {owner}",
                         node=node, scope=k.scope, key=k.key, owner=owner)  # fmt: skip
