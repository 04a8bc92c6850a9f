"""Fast reads for the API: plain SQL (SQLAlchemy Core ``select``) straight to JSON-ready
dicts, filtered to what a principal may see. No ORM object graphs on these paths.

SQLite reads use their own engine without ``BEGIN IMMEDIATE`` (readers must not queue
behind writers; the store is in WAL mode), so reads and lease writes run side by side.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, Select, create_engine, event, func, or_, select
from sqlalchemy.engine import Connection

from gpufabric.domain.auth import Principal, Role
from gpufabric.domain.models import QUARANTINE, lease_active
from gpufabric.domain.move_json import FINISHED
from gpufabric.domain.terms import terms_json, terms_of
from gpufabric.store.convert import segment_options
from gpufabric.store.core import Store
from gpufabric.store.registry import registered_offering_fields, registered_terms
from gpufabric.store.tables import (
    EventRow,
    LeaseNetworkRow,
    LeaseRow,
    MoveEventRow,
    MoveRow,
    NetworkRow,
    NodeFabricPortsRow,
    NodePortKeyRow,
    NodeRow,
    OfferingRow,
    RevisionRow,
    SegmentRow,
    TenantRow,
    lease_active_at,
)

N, L, T, NW = NodeRow.__table__, LeaseRow.__table__, TenantRow.__table__, NetworkRow.__table__


def _iso(t: datetime | None) -> str | None:
    if t is None:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).astimezone(UTC).isoformat()


def _read_engine(store: Store) -> Engine:
    engine = store.engine
    if engine.dialect.name != "sqlite":
        return engine
    reader = create_engine(engine.url, connect_args={"timeout": 30.0, "check_same_thread": False})

    @event.listens_for(reader, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA query_only=ON")
        cur.close()

    return reader


class Reader:
    """Read-only queries over one store (thread-safe: a connection per call)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.engine = _read_engine(store)

    def revision(self) -> int:
        with self.engine.connect() as c:
            return int(c.execute(select(RevisionRow.n).where(RevisionRow.id == 1)).scalar() or 0)

    # ------------------------------------------------------------------ visibility
    @staticmethod
    def _active(now: datetime) -> Any:
        return lease_active_at(now, L.c.start, L.c.end)

    def _node_filter(self, q: Select[Any], p: Principal, now: datetime) -> Select[Any]:
        if p.role is Role.LESSEE:
            leased = (
                select(L.c.node_id).join(T, T.c.id == L.c.tenant_id).where(T.c.name == p.tenant, self._active(now))
            )
            return q.where(N.c.id.in_(leased))
        if p.role is Role.OWNER:
            return q.where(N.c.owner == p.tenant)
        return q

    # ------------------------------------------------------------------ nodes
    def nodes(
        self,
        p: Principal,
        limit: int,
        offset: int,
        tenant: str | None = None,
        state: str | None = None,
        fabric: Collection[str] | None = None,
        name: str | None = None,
        host_id: str | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        """A page of nodes as the API shows them, less their fabric columns (``engine.columns``);
        ``fabric``: only nodes with ports on a row of one of these instances; ``host_id``: the
        node an outside inventory names so (Ironic's UUID)."""
        now = datetime.now(UTC)
        with self.engine.connect() as c:
            q = self._node_filter(select(N.c.id, N.c.name, N.c.offering, N.c.state, N.c.owner, N.c.host, N.c.slot_modules, N.c.host_id), p, now)
            if name is not None:
                q = q.where(N.c.name == name)
            if host_id is not None:
                q = q.where(N.c.host_id == host_id)
            if state is not None:
                q = q.where(N.c.state == state)
            if fabric is not None:
                q = q.where(N.c.id.in_(select(NodeFabricPortsRow.node_id).where(NodeFabricPortsRow.instance.in_(list(fabric)))))
            cur = self._current(c, now)
            if tenant is not None:
                ids = [i for i, (t, _l) in cur.items() if t == tenant]
                q = q.where(N.c.id.in_(ids)) if tenant != QUARANTINE else q.where(N.c.id.not_in(list(cur)))
            total = int(c.execute(select(func.count()).select_from(q.subquery())).scalar() or 0)
            rows = c.execute(q.order_by(N.c.name).limit(limit).offset(offset)).all()
            return self._node_dicts(c, rows, cur), total

    def _current(self, c: Connection, now: datetime) -> dict[int, tuple[str, int]]:
        q = select(L.c.node_id, T.c.name, L.c.id).join(T, T.c.id == L.c.tenant_id).where(self._active(now))
        return {r[0]: (r[1], r[2]) for r in c.execute(q)}

    def _node_dicts(self, c: Connection, rows: Sequence[Any], cur: dict[int, tuple[str, int]]) -> list[dict[str, Any]]:
        slots: dict[str, list[dict[str, Any]]] = {}  # a shared host's slots (issue 33), with their tenants
        q = select(N.c.id, N.c.name, N.c.host, N.c.slot_modules).where(N.c.host.in_([r.name for r in rows]))
        for s in c.execute(q.order_by(N.c.name)):
            tenant = cur.get(s.id, (QUARANTINE, None))[0]
            slots.setdefault(s.host, []).append({"name": s.name, "modules": list(s.slot_modules or []), "tenant": tenant})
        return [
            {
                "name": r.name,
                "offering": r.offering,
                "state": r.state,
                "owner": r.owner,
                "host_id": r.host_id,
                "tenant": cur.get(r.id, (QUARANTINE, None))[0],
                "lease": cur.get(r.id, (QUARANTINE, None))[1],
                "host": r.host or None,
                "slot_modules": list(r.slot_modules or []),
                "slots": slots.get(r.name, []),
            }
            for r in rows
        ]

    def lookup_port(self, p: Principal, scope: str, key: str) -> str | None:
        """The name of the node whose ports hold the key ``scope``/``key`` (None: no such port,
        or not one ``p`` may see)."""
        with self.engine.connect() as c:
            K = NodePortKeyRow.__table__
            q = select(N.c.name).join(K, K.c.node_id == N.c.id).where(K.c.scope == scope, K.c.key == key)
            q = self._node_filter(q, p, datetime.now(UTC))
            return c.execute(q).scalar()

    # ------------------------------------------------------------------ leases
    def leases(
        self,
        p: Principal,
        limit: int,
        offset: int,
        tenant: str | None = None,
        node: str | None = None,
        state: str | None = None,
        lease_id: int | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        now = datetime.now(UTC)
        with self.engine.connect() as c:
            q = (
                select(L, T.c.name.label("tenant"), N.c.name.label("node"))
                .join(T, T.c.id == L.c.tenant_id)
                .join(N, N.c.id == L.c.node_id)
            )
            if p.role is Role.LESSEE:
                q = q.where(T.c.name == p.tenant)
            elif p.role is Role.OWNER:
                q = q.where(or_(N.c.owner == p.tenant, T.c.name == p.tenant))
            if lease_id is not None:
                q = q.where(L.c.id == lease_id)
            if tenant is not None:
                q = q.where(T.c.name == tenant)
            if node is not None:
                q = q.where(N.c.name == node)
            if state == "active":
                q = q.where(self._active(now))
            elif state == "ended":
                q = q.where(L.c.end.is_not(None), L.c.end <= now)
            elif state == "scheduled":
                q = q.where(L.c.start > now)
            total = int(c.execute(select(func.count()).select_from(q.subquery())).scalar() or 0)
            rows = c.execute(q.order_by(L.c.id).limit(limit).offset(offset)).all()
            nets: dict[int, list[str]] = {}
            if rows:
                LN = LeaseNetworkRow.__table__
                nq = select(LN.c.lease_id, NW.c.name).join(NW, NW.c.id == LN.c.network_id)
                for r in c.execute(nq.where(LN.c.lease_id.in_([x.id for x in rows]))):
                    nets.setdefault(r.lease_id, []).append(r.name)
            out, names = [], [t.name for t in registered_terms()]
            for r in rows:
                start, end = _iso(r.start), _iso(r.end)
                active = lease_active(r.start, r.end, now)
                out.append(
                    {
                        "id": r.id,
                        "tenant": r.tenant,
                        "node": r.node,
                        "start": start,
                        "end": end,
                        "networks": sorted(nets.get(r.id, [])),
                        "offering": r.offering,
                        "owner": r.owner,
                        **terms_json(terms_of(r.terms), names),
                        "active": active,
                    }
                )
            return out, total

    # ------------------------------------------------------------------ tenants, networks, offerings
    def tenants(self, p: Principal, limit: int, offset: int, name: str | None = None) -> tuple[list[dict[str, Any]], int]:
        with self.engine.connect() as c:
            q = select(T.c.name, T.c.created_at)
            if not p.sees_all:
                q = q.where(T.c.name == p.tenant)
            if name is not None:
                q = q.where(T.c.name == name)
            total = int(c.execute(select(func.count()).select_from(q.subquery())).scalar() or 0)
            rows = c.execute(q.order_by(T.c.name).limit(limit).offset(offset)).all()
            return [{"name": r.name, "created_at": _iso(r.created_at)} for r in rows], total

    def networks(
        self, p: Principal, limit: int, offset: int, tenant: str | None = None, name: str | None = None
    ) -> tuple[list[dict[str, Any]], int]:
        with self.engine.connect() as c:
            q = select(NW.c.id, NW.c.name, T.c.name.label("tenant"), NW.c.description, NW.c.tags).join(
                T, T.c.id == NW.c.tenant_id
            )
            if not p.sees_all:
                q = q.where(T.c.name == p.tenant)
            if tenant is not None:
                q = q.where(T.c.name == tenant)
            if name is not None:
                q = q.where(NW.c.name == name)
            total = int(c.execute(select(func.count()).select_from(q.subquery())).scalar() or 0)
            rows = c.execute(q.order_by(T.c.name, NW.c.name).limit(limit).offset(offset)).all()
            segs: dict[int, list[dict[str, Any]]] = {}
            if rows:
                S = SegmentRow.__table__
                for r in c.execute(select(S).where(S.c.network_id.in_([x.id for x in rows])).order_by(S.c.fabric)):
                    segs.setdefault(r.network_id, []).append(
                        {
                            "fabric": r.fabric,
                            "seg_id": r.seg_id,
                            "scope": r.scope,
                            "key": r.key,
                            **({"options": dict(segment_options(r.options))} if r.options else {}),
                        }
                    )
            return [
                {"name": r.name, "tenant": r.tenant, "description": r.description or "", "tags": list(r.tags or []),
                 "segments": segs.get(r.id, [])}
                for r in rows
            ], total  # fmt: skip

    def offerings(self, limit: int, offset: int, name: str | None = None) -> tuple[list[dict[str, Any]], int]:
        OF = OfferingRow.__table__
        with self.engine.connect() as c:
            q = select(OF)
            if name is not None:
                q = q.where(OF.c.name == name)
            total = int(c.execute(select(func.count()).select_from(q.subquery())).scalar() or 0)
            rows = c.execute(q.order_by(OF.c.name).limit(limit).offset(offset)).all()
            return [offering_json(r.name, r.description, r.settings) for r in rows], total

    # ------------------------------------------------------------------ moves, events
    def moves(
        self,
        p: Principal,
        limit: int,
        offset: int,
        node: str | None = None,
        state: str | None = None,
        tenant: str | None = None,
        move_id: int | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        M = MoveRow.__table__
        with self.engine.connect() as c:
            q = _moves_select(p, node, state, tenant, move_id)
            total = int(c.execute(select(func.count()).select_from(q.subquery())).scalar() or 0)
            rows = c.execute(q.order_by(M.c.id.desc()).limit(limit).offset(offset)).all()
            return [move_dict(r) for r in rows], total

    def move(self, p: Principal, move_id: int) -> dict[str, Any] | None:
        """The move ``move_id`` as :meth:`moves` lists it, or None when ``p`` may not see it (one query)."""
        with self.engine.connect() as c:
            row = c.execute(_moves_select(p, move_id=move_id)).first()
            return move_dict(row) if row is not None else None

    def move_events(self, move_id: int, after: int = 0) -> list[dict[str, Any]]:
        with self.engine.connect() as c:
            return _move_events(c, move_id, after)

    def move_progress(
        self, p: Principal, move_id: int, after: int = 0
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """What an event stream reads each time it wakes, on one connection: the move's events after
        event ``after``, then its row (None: ``p`` may not see it); once the row says the move ended,
        its events after those once more (the last ones commit with its end)."""
        with self.engine.connect() as c:
            events = _move_events(c, move_id, after)
            row = c.execute(_moves_select(p, move_id=move_id)).first()
            m = move_dict(row) if row is not None else None
            if m is not None and m["status"] in FINISHED:
                events += _move_events(c, move_id, events[-1]["id"] if events else after)
            return events, m

    def events(
        self, p: Principal, limit: int, offset: int, action: str | None = None, outcome: str | None = None
    ) -> tuple[list[dict[str, Any]], int]:
        E = EventRow.__table__
        with self.engine.connect() as c:
            q = select(E)
            if not p.sees_all:
                q = q.where(E.c.tenant == p.tenant, _this_tenant(p, E.c.at))
            if action is not None:
                q = q.where(E.c.action == action)
            if outcome is not None:
                q = q.where(E.c.outcome == outcome)
            total = int(c.execute(select(func.count()).select_from(q.subquery())).scalar() or 0)
            rows = c.execute(q.order_by(E.c.id.desc()).limit(limit).offset(offset)).all()
            return [
                {
                    "id": r.id,
                    "at": _iso(r.at),
                    "actor": r.actor if p.is_admin or r.role != "admin" else "operator",  # no operator names
                    "role": r.role,
                    "tenant": r.tenant,
                    "action": r.action,
                    "target": r.target,
                    "outcome": r.outcome,
                    "message": r.message,
                }
                for r in rows
            ], total


def _this_tenant(p: Principal, at: Any) -> Any:
    """SQL: a row written (``at``) since ``p``'s tenant was created. A tenant re-created under a
    deleted one's name reads none of its moves or events (history names tenants by name)."""
    return at >= select(T.c.created_at).where(T.c.name == p.tenant).scalar_subquery()


def _moves_select(
    p: Principal,
    node: str | None = None,
    state: str | None = None,
    tenant: str | None = None,
    move_id: int | None = None,
) -> Select[Any]:
    """The moves ``p`` may see, narrowed by the filters given."""
    M = MoveRow.__table__
    q = select(M)
    if p.role is Role.OWNER:  # its tenant's moves, and every move of the nodes it owns (its offers)
        owned = select(N.c.name).where(N.c.owner == p.tenant)
        q = q.where(or_(M.c.from_tenant == p.tenant, M.c.to_tenant == p.tenant, M.c.node.in_(owned)))
    elif not p.sees_all:
        q = q.where(or_(M.c.from_tenant == p.tenant, M.c.to_tenant == p.tenant))
    if not p.sees_all:
        q = q.where(_this_tenant(p, M.c.created_at))
    if move_id is not None:
        q = q.where(M.c.id == move_id)
    if node is not None:
        q = q.where(M.c.node == node)
    if state is not None:
        q = q.where(M.c.status == state)
    if tenant is not None:
        q = q.where(or_(M.c.from_tenant == tenant, M.c.to_tenant == tenant))
    return q


def _move_events(c: Connection, move_id: int, after: int) -> list[dict[str, Any]]:
    E = MoveEventRow.__table__
    q = select(E).where(E.c.move_id == move_id, E.c.id > after).order_by(E.c.id)
    return [{"id": r.id, "at": _iso(r.at), "phase": r.phase, "message": r.message, "seconds": r.seconds}
            for r in c.execute(q)]  # fmt: skip


def move_dict(r: Any) -> dict[str, Any]:
    return {
        "id": r.id,
        "node": r.node,
        "from_tenant": r.from_tenant,
        "to_tenant": r.to_tenant,
        "offering": r.offering,
        "networks": [n for n in r.networks.split(",") if n],
        "phase": r.phase,
        "status": r.status,
        "attempts": r.attempts,
        "error": r.error,
        "created_at": _iso(r.created_at),
        "updated_at": _iso(r.updated_at),
        "claimed_by": r.claimed_by,
    }


def names(rows: Iterable[dict[str, Any]]) -> list[str]:
    return [str(r["name"]) for r in rows]


def offering_json(name: str, description: str, settings: Any) -> dict[str, Any]:
    """An offering as ``GET /offerings`` answers it: the settings the registered kinds declare
    as fields (``FabricKind.offering_settings``) each its own key (its value when unset), the
    others under ``settings``."""
    fields = registered_offering_fields()
    pairs = {str(k): str(v) for k, v in (settings or [])}
    own = {k: pairs.get(k, default) for k, default in fields.items()}
    return {"name": name, "description": description, **own, "settings": {k: v for k, v in pairs.items() if k not in fields}}
