"""SQLAlchemy 2 table mappings of the store (typed ``Mapped[]`` declarative).

Owns the relational shape only: rows never leave :mod:`gpufabric.store.core`,
which converts them to and from domain objects. The schema itself is created by the
Alembic migrations in ``service/migrations`` (which must be kept in step with this
file); ``Base.metadata`` is only used by tests that compare the two.

Uniqueness that protects isolation lives in the database, not in Python, so that two
replicas can never hand out the same switch port, GUID, VLAN or PKey:
``node_port_keys (scope, key)``, ``segments (fabric, seg_id)`` and ``segments (scope, key)``.

``node_fabric_ports`` holds every fabric kind's ports: one row per (node, fabric instance),
``data`` the entries the kind validated (JSON list). ``node_port_keys`` holds what a node's
ports hold that no other node may (``FabricKind.port_keys``: a switch interface, a port GUID,
...), one row per key, written with the node's ports; a port's node is found by its key.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint, and_, or_
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from gpufabric.domain.errors import ValidationError


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend.

    PostgreSQL stores ``timestamptz``; SQLite has no time zones, so values are stored
    as naive UTC and get ``tzinfo=UTC`` back when read. Naive datetimes are rejected.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValidationError("timestamp", value.isoformat(), "a timezone-aware datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    type_annotation_map: dict[Any, Any] = {datetime: UtcDateTime}


class NodeRow(Base):
    __tablename__ = "nodes"
    __table_args__ = (Index("uq_nodes_host_id", "host_id", unique=True),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    offering: Mapped[str] = mapped_column(String(63), default="")
    state: Mapped[str] = mapped_column(String(16))
    owner: Mapped[str | None] = mapped_column(String(63), nullable=True)  # owning tenant (ESI owner), 0004
    host: Mapped[str] = mapped_column(String(63), default="")  # a slot's host (issue 33), 0018
    slot_modules: Mapped[Any] = mapped_column(JSON, default=list)  # a slot's GPU module ids, 0018
    # its identity in an outside inventory: what Neutron's binding:host_id names (Ironic's node UUID), 0019
    host_id: Mapped[str | None] = mapped_column(String(255), nullable=True)

    fabric_ports: Mapped[list[NodeFabricPortsRow]] = relationship(
        back_populates="node", cascade="all, delete-orphan", order_by="NodeFabricPortsRow.instance"
    )
    port_keys: Mapped[list[NodePortKeyRow]] = relationship(back_populates="node", cascade="all, delete-orphan")


class NodeFabricPortsRow(Base):
    """A node's ports on one fabric instance (migrations 0008, 0012, 0013, 0015)."""

    __tablename__ = "node_fabric_ports"
    __table_args__ = (UniqueConstraint("node_id", "instance", name="uq_node_fabric_ports_node_instance"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), index=True)
    instance: Mapped[str] = mapped_column(String(63))
    data: Mapped[Any] = mapped_column(JSON)

    node: Mapped[NodeRow] = relationship(back_populates="fabric_ports")


class NodePortKeyRow(Base):
    """One key a node's ports hold (``FabricKind.port_keys``), unique per scope (migration 0015)."""

    __tablename__ = "node_port_keys"
    __table_args__ = (UniqueConstraint("scope", "key", name="uq_node_port_keys_scope_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), index=True)
    scope: Mapped[str] = mapped_column(String(63))
    key: Mapped[str] = mapped_column(String(255))

    node: Mapped[NodeRow] = relationship(back_populates="port_keys")


class TenantRow(Base):
    __tablename__ = "tenants"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class NetworkRow(Base):
    """Network names are unique per tenant (0004), never global: a tenant cannot probe another's names."""

    __tablename__ = "networks"
    __table_args__ = (UniqueConstraint("tenant_id", "name", name="uq_networks_tenant_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(63))
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    description: Mapped[str] = mapped_column(Text, default="", server_default="")  # 0017
    tags: Mapped[list[str]] = mapped_column(JSON, default=list, server_default="[]")  # 0017

    tenant: Mapped[TenantRow] = relationship()
    segments: Mapped[list[SegmentRow]] = relationship(
        back_populates="network", cascade="all, delete-orphan", order_by="SegmentRow.fabric"
    )


class SegmentRow(Base):
    """One isolation id of a network on one fabric instance: its segmentation id, and the
    fabric's own id of it (``key``, unique per ``scope``: the kind's, e.g. a VLAN; 0016)."""

    __tablename__ = "segments"
    __table_args__ = (
        UniqueConstraint("fabric", "seg_id", name="uq_segments_fabric_seg_id"),
        UniqueConstraint("network_id", "fabric", name="uq_segments_network_fabric"),
        UniqueConstraint("scope", "key", name="uq_segments_scope_key"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    network_id: Mapped[int] = mapped_column(ForeignKey("networks.id", ondelete="CASCADE"), index=True)
    fabric: Mapped[str] = mapped_column(String(63))  # the fabric instance (0007: was 16 chars)
    seg_id: Mapped[int] = mapped_column(Integer)
    scope: Mapped[str | None] = mapped_column(String(63), nullable=True)
    key: Mapped[int | None] = mapped_column(Integer, nullable=True)
    options: Mapped[str | None] = mapped_column(Text, nullable=True)  # 0011: JSON, the kind's own (Segment.options)

    network: Mapped[NetworkRow] = relationship(back_populates="segments")


class OfferingRow(Base):
    __tablename__ = "offerings"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    settings: Mapped[list[list[str]]] = mapped_column(JSON, default=list)  # [[key, value], ...]: the kinds' (0014: with dpu_mode)


class LeaseNetworkRow(Base):
    __tablename__ = "lease_networks"

    lease_id: Mapped[int] = mapped_column(ForeignKey("leases.id", ondelete="CASCADE"), primary_key=True)
    network_id: Mapped[int] = mapped_column(ForeignKey("networks.id"), primary_key=True, index=True)

    network: Mapped[NetworkRow] = relationship()


class LeaseRow(Base):
    __tablename__ = "leases"
    __table_args__ = {"sqlite_autoincrement": True}  # ids never reused (0003)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"), index=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id"), index=True)
    start: Mapped[datetime]
    end: Mapped[datetime | None]
    offering: Mapped[str] = mapped_column(String(63))
    owner: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    terms: Mapped[dict[str, int]] = mapped_column(JSON, default=dict, server_default="{}")  # the kinds' lease terms (0014)

    tenant: Mapped[TenantRow] = relationship()
    node: Mapped[NodeRow] = relationship()
    networks: Mapped[list[LeaseNetworkRow]] = relationship(cascade="all, delete-orphan")


def lease_active_at(now: datetime, start: Any = LeaseRow.start, end: Any = LeaseRow.end) -> Any:
    """SQL of :func:`gpufabric.domain.models.lease_active` (``start <= now < end``, no end: open), the
    one translation every store query uses; ``start``/``end`` default to :class:`LeaseRow`'s columns
    (pass a Core table's for a Core query)."""
    return and_(start <= now, lease_not_over_at(now, end))


def lease_not_over_at(now: datetime, end: Any = LeaseRow.end) -> Any:
    """SQL: the lease has not ended at ``now`` (active or still to come; ending exactly at ``now`` is over)."""
    return or_(end.is_(None), end > now)


class MoveRow(Base):
    """A durable move intent (node from one tenant to another). The move workflow
    claims rows with ``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL and records
    its progress in ``phase``/``status``; ``claimed_by``/``claimed_at`` name the replica."""

    __tablename__ = "moves"
    __table_args__ = {"sqlite_autoincrement": True}  # ids never reused (0003)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    node: Mapped[str] = mapped_column(String(63), index=True)
    from_tenant: Mapped[str] = mapped_column(String(63))
    to_tenant: Mapped[str] = mapped_column(String(63))
    offering: Mapped[str] = mapped_column(String(63), default="")
    phase: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16), index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    claimed_by: Mapped[str | None] = mapped_column(String(255))
    claimed_at: Mapped[datetime | None]
    networks: Mapped[str] = mapped_column(Text, default="", server_default="")  # comma-separated, 0002
    terms: Mapped[dict[str, int]] = mapped_column(JSON, default=dict, server_default="{}")  # the new lease's terms (0014)
    heartbeat_at: Mapped[datetime | None]  # 0003
    lease_end: Mapped[datetime | None]  # 0003
    not_before: Mapped[datetime | None]  # 0003: a scheduled lease's start
    requested_by: Mapped[str] = mapped_column(String(255), default="", server_default="")  # 0003: the principal
    lock_session: Mapped[int | None] = mapped_column(Integer, nullable=True)  # 0010: its fabric lock's backend PID


class FabricEpochRow(Base):
    """One row: bumped by every worker that applies to the fabrics (under the fabric lock), so a
    warm worker knows whether its cached read-back is still the last word (0003)."""

    __tablename__ = "fabric_epoch"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    epoch: Mapped[int] = mapped_column(Integer, default=0)
    writer: Mapped[str] = mapped_column(String(255), default="")


class TokenRow(Base):
    """An API token (0004): only the sha256 of its secret is stored; revoked tokens are kept;
    refused from ``expires_at`` on (0006; None: never)."""

    __tablename__ = "tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(63))
    role: Mapped[str] = mapped_column(String(16))
    tenant: Mapped[str | None] = mapped_column(String(63), nullable=True)
    secret_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(255), default="")
    revoked_at: Mapped[datetime | None]
    expires_at: Mapped[datetime | None]


class EventRow(Base):
    """The append-only event log (0004): every write, who, what, when, and its outcome."""

    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16))
    tenant: Mapped[str | None] = mapped_column(String(63), nullable=True, index=True)  # the object's tenant
    action: Mapped[str] = mapped_column(String(63))
    target: Mapped[str] = mapped_column(String(255), default="")
    outcome: Mapped[str] = mapped_column(String(8))  # ok | error
    message: Mapped[str] = mapped_column(Text, default="")


class MoveEventRow(Base):
    """Progress of a move as its worker reports it (0004): phase changes, messages, timings."""

    __tablename__ = "move_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    move_id: Mapped[int] = mapped_column(Integer, index=True)
    at: Mapped[datetime] = mapped_column(default=utcnow)
    phase: Mapped[str] = mapped_column(String(16))
    message: Mapped[str] = mapped_column(Text, default="")
    seconds: Mapped[float | None] = mapped_column(Float, nullable=True)


class RevisionRow(Base):
    """One row whose counter triggers bump on every write to the tables the API serves (0004):
    read endpoints cache their serialised answers per revision (and ETag them)."""

    __tablename__ = "gf_revision"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    n: Mapped[int] = mapped_column(Integer, default=0)
