"""The lease write of the API's hot path in plain SQL, prepared once, with its event in the
same transaction: the same rules as :func:`gpufabric.service.store_leases.create` (tenant,
node, offering and the tenant's own networks exist; no overlap on the node, checked under the
node's row lock), without building ORM objects or statement objects per call.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

from sqlalchemy import Integer, String, TextualSelect, bindparam, text

from gpufabric.domain.auth import Principal
from gpufabric.domain.errors import ConflictError, NotFoundError, ValidationError
from gpufabric.domain.models import Lease
from gpufabric.service.db_models import UtcDateTime
from gpufabric.service.store import Store

TS = UtcDateTime()
_IDS: Final = text(
    "SELECT (SELECT id FROM tenants WHERE name = :tenant) AS tenant_id,"
    " (SELECT id FROM offerings WHERE name = :offering) AS offering_id"
)
_NODE: Final = text("SELECT id FROM nodes WHERE name = :node")
_NODE_PG: Final = text("SELECT id FROM nodes WHERE name = :node FOR UPDATE")
_NETS: Final = text("SELECT name, id FROM networks WHERE tenant_id = :tid AND name IN :names").bindparams(
    bindparam("names", expanding=True)
)
_OVERLAP = (
    'SELECT l.id, l.start, l."end", t.name FROM leases l JOIN tenants t ON t.id = l.tenant_id'
    ' WHERE l.node_id = :nid AND (l."end" IS NULL OR l."end" > :start)'
)


def _typed(sql: str) -> TextualSelect:
    return (
        text(sql)
        .bindparams(bindparam("start", type_=TS), *([bindparam("end", type_=TS)] if ":end" in sql else []))
        .columns(id=Integer, start=TS, end=TS, name=String)
    )


_OVERLAP_OPEN: Final = _typed(_OVERLAP + " ORDER BY l.start LIMIT 1")
_OVERLAP_BOUNDED: Final = _typed(_OVERLAP + " AND l.start < :end ORDER BY l.start LIMIT 1")
_INSERT: Final = text(
    'INSERT INTO leases (tenant_id, node_id, start, "end", offering, owner, created_at, gpus)'
    " VALUES (:tid, :nid, :start, :end, :offering, :owner, :now, :gpus) RETURNING id"
).bindparams(bindparam("start", type_=TS), bindparam("end", type_=TS), bindparam("now", type_=TS))
_LEASED: Final = text("UPDATE nodes SET state = 'leased' WHERE id = :nid")
_LINK: Final = text("INSERT INTO lease_networks (lease_id, network_id) VALUES (:lid, :net)")
_EVENT: Final = text(
    "INSERT INTO events (at, actor, role, tenant, action, target, outcome, message)"
    " VALUES (:now, :actor, :role, :tenant, 'lease.create', :target, 'ok', '')"
).bindparams(bindparam("now", type_=TS))


def _aware(lease: Lease) -> None:
    for name, t in (("start", lease.start), ("end", lease.end)):
        if t is not None and (t.tzinfo is None or t.utcoffset() is None):
            raise ValidationError(f"lease.{name}", t.isoformat(), "a timezone-aware datetime (e.g. ...+00:00)")


def create_lease(store: Store, lease: Lease, who: Principal) -> Lease:
    """Insert ``lease`` and its ``lease.create`` event in one transaction; the lease with its id."""
    if lease.id is not None:
        raise ValidationError("lease.id", lease.id, "unset (the store assigns lease ids)")
    _aware(lease)
    now = datetime.now(UTC)
    with store._tx() as s:
        c = s.connection()
        tenant_id, offering_id = c.execute(_IDS, {"tenant": lease.tenant, "offering": lease.offering}).one()
        if tenant_id is None:
            raise NotFoundError("tenant", lease.tenant)
        node_q = _NODE_PG if c.dialect.name == "postgresql" else _NODE  # SQLite: BEGIN IMMEDIATE holds the lock
        node_id = c.execute(node_q, {"node": lease.node}).scalar()
        if node_id is None:
            raise NotFoundError("node", lease.node)
        if offering_id is None:
            raise NotFoundError("offering", lease.offering)
        wanted = list(dict.fromkeys(lease.networks))
        found: dict[str, int] = dict(c.execute(_NETS, {"tid": tenant_id, "names": wanted}).all()) if wanted else {}
        for name in wanted:
            if name not in found:
                raise NotFoundError("network", f"{lease.tenant}/{name}")
        if lease.end is None:
            other = c.execute(_OVERLAP_OPEN, {"nid": node_id, "start": lease.start}).first()
        else:
            other = c.execute(_OVERLAP_BOUNDED, {"nid": node_id, "start": lease.start, "end": lease.end}).first()
        if other is not None:
            until = other.end.isoformat() if other.end else "open end"
            raise ConflictError(
                f"node {lease.node} already has lease {other.id} (tenant {other.name}, {other.start.isoformat()}"
                f" to {until}) overlapping the requested time",
                node=lease.node,
                lease=other.id,
            )
        lease_id = int(
            c.execute(
                _INSERT,
                {"tid": tenant_id, "nid": node_id, "start": lease.start, "end": lease.end, "offering": lease.offering,
                 "owner": lease.owner, "now": now, "gpus": lease.gpus},
            ).scalar_one()
        )
        if lease.active_at(now):
            c.execute(_LEASED, {"nid": node_id})
        if wanted:
            c.execute(_LINK, [{"lid": lease_id, "net": found[n]} for n in wanted])
        c.execute(_EVENT, {"now": now, "actor": who.name[:255], "role": who.role.value, "tenant": lease.tenant,
                           "target": lease.node})
    return Lease(lease.tenant, lease.node, lease.start, lease.end, tuple(sorted(set(lease.networks))),
                 lease.offering, lease.owner, lease_id, lease.gpus)
