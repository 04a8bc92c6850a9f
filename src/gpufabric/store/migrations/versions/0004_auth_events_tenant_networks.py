"""API tokens (hashed), the append-only event log, move progress events, node owners,
network names unique per tenant (not globally), and a revision counter bumped by triggers
on every write to the tables the API serves (its read cache and ETags key on it).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)
TRACKED = (
    "nodes",
    "ethernet_ports",
    "ib_ports",
    "gpus",
    "dpus",
    "tenants",
    "networks",
    "segments",
    "offerings",
    "leases",
    "lease_networks",
    "tokens",
    "events",
)


def _networks_table() -> sa.Table:
    return sa.Table(
        "networks",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey("tenants.id"), nullable=False, index=True),
        sa.Column("created_at", TS, nullable=False),
        sa.UniqueConstraint("tenant_id", "name", name="uq_networks_tenant_name"),
    )


def _networks_per_tenant() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.drop_constraint("networks_name_key", "networks", type_="unique")
        op.create_unique_constraint("uq_networks_tenant_name", "networks", ["tenant_id", "name"])
        return
    # SQLite: the inline UNIQUE(name) can only go by rebuilding the table. With foreign keys on,
    # dropping the old table would cascade into segments; they can only be switched off outside a
    # transaction (the documented 12-step procedure), so commit, switch off, rebuild, check, switch on.
    op.execute("COMMIT")
    op.execute("PRAGMA foreign_keys=OFF")
    op.execute("BEGIN IMMEDIATE")
    with op.batch_alter_table("networks", copy_from=_networks_table(), recreate="always"):
        pass
    if not bind.dialect.has_index(bind, "networks", "ix_networks_tenant_id"):
        op.create_index("ix_networks_tenant_id", "networks", ["tenant_id"])
    bad = bind.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if bad:
        raise RuntimeError(f"foreign key check failed after rebuilding networks: {bad[:3]}")
    op.execute("COMMIT")
    op.execute("PRAGMA foreign_keys=ON")
    op.execute("BEGIN IMMEDIATE")


def _revision_triggers() -> None:
    op.create_table(
        "gf_revision",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("n", sa.Integer, nullable=False),
    )
    op.execute("INSERT INTO gf_revision (id, n) VALUES (1, 0)")
    bump = "UPDATE gf_revision SET n = n + 1 WHERE id = 1"
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION gf_bump_revision() RETURNS trigger AS $$ BEGIN " + bump + "; RETURN NULL; END $$"
            " LANGUAGE plpgsql"
        )
        for t in TRACKED:
            op.execute(
                f"CREATE TRIGGER gf_rev_{t} AFTER INSERT OR UPDATE OR DELETE ON {t}"
                " FOR EACH STATEMENT EXECUTE FUNCTION gf_bump_revision()"
            )
        op.execute(
            "CREATE TRIGGER gf_rev_moves AFTER INSERT OR DELETE OR UPDATE OF phase, status, error ON moves"
            " FOR EACH STATEMENT EXECUTE FUNCTION gf_bump_revision()"
        )
        return
    for t in TRACKED:
        for ev in ("INSERT", "UPDATE", "DELETE"):
            op.execute(f"CREATE TRIGGER gf_rev_{t}_{ev.lower()} AFTER {ev} ON {t} BEGIN {bump}; END")
    for ev in ("INSERT", "DELETE", "UPDATE OF phase, status, error"):
        op.execute(f"CREATE TRIGGER gf_rev_moves_{ev.split()[0].lower()} AFTER {ev} ON moves BEGIN {bump}; END")


def upgrade() -> None:
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("tenant", sa.String(63), nullable=True),
        sa.Column("secret_sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("created_by", sa.String(255), nullable=False),
        sa.Column("revoked_at", TS, nullable=True),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("at", TS, nullable=False, index=True),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("tenant", sa.String(63), nullable=True, index=True),
        sa.Column("action", sa.String(63), nullable=False),
        sa.Column("target", sa.String(255), nullable=False),
        sa.Column("outcome", sa.String(8), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
    )
    op.create_table(
        "move_events",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("move_id", sa.Integer, nullable=False, index=True),
        sa.Column("at", TS, nullable=False),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("seconds", sa.Float, nullable=True),
    )
    with op.batch_alter_table("nodes") as b:
        b.add_column(sa.Column("owner", sa.String(63), nullable=True))
    _networks_per_tenant()
    _revision_triggers()


def downgrade() -> None:
    raise NotImplementedError("0004 has no downgrade: network names may now repeat across tenants")
