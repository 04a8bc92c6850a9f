"""Leases and moves may take a GPU count (NVLink partitions); moves heartbeat while a worker
holds them (fencing) and carry the new lease's end; the fabric epoch tells a warm worker whether its
last verified read-back is still the latest write; DPUs keep their pairing details (PF, VFs, management VF, representors).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # AUTOINCREMENT on SQLite (a table rebuild): an id once given to a lease or a move is never
    # given again. PostgreSQL sequences never reuse ids; its tables are altered in place. With
    # foreign keys on, dropping the old leases table would cascade into lease_networks: they can
    # only be switched off outside a transaction (SQLite's 12-step procedure).
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    recreate: Literal["always", "auto"] = "always" if sqlite else "auto"
    auto = {"sqlite_autoincrement": True} if sqlite else {}
    if sqlite:
        op.execute("COMMIT")
        op.execute("PRAGMA foreign_keys=OFF")
        op.execute("BEGIN IMMEDIATE")
    with op.batch_alter_table("leases", recreate=recreate, table_kwargs=auto) as b:
        b.add_column(sa.Column("gpus", sa.Integer, nullable=True))
    with op.batch_alter_table("moves", recreate=recreate, table_kwargs=auto) as b:
        b.add_column(sa.Column("gpus", sa.Integer, nullable=True))
        b.add_column(sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True))
        b.add_column(sa.Column("lease_end", sa.DateTime(timezone=True), nullable=True))
        b.add_column(sa.Column("not_before", sa.DateTime(timezone=True), nullable=True))
        b.add_column(sa.Column("requested_by", sa.String(255), nullable=False, server_default=""))
    if sqlite:
        bad = bind.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
        if bad:
            raise RuntimeError(f"foreign key check failed after rebuilding leases/moves: {bad[:3]}")
        op.execute("COMMIT")
        op.execute("PRAGMA foreign_keys=ON")
        op.execute("BEGIN IMMEDIATE")
    with op.batch_alter_table("dpus") as b:
        b.add_column(sa.Column("details", sa.JSON, nullable=False, server_default="{}"))
    op.create_table(
        "fabric_epoch",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("epoch", sa.Integer, nullable=False, server_default="0"),
        sa.Column("writer", sa.String(255), nullable=False, server_default=""),
    )


def downgrade() -> None:
    op.drop_table("fabric_epoch")
    with op.batch_alter_table("dpus") as b:
        b.drop_column("details")
    with op.batch_alter_table("moves") as b:
        b.drop_column("requested_by")
        b.drop_column("not_before")
        b.drop_column("lease_end")
        b.drop_column("heartbeat_at")
        b.drop_column("gpus")
    with op.batch_alter_table("leases") as b:
        b.drop_column("gpus")
