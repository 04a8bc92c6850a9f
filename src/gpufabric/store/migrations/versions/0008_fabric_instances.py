"""Fabric instances: ``node_fabric_ports`` (the generic table of the fabric kinds without typed
tables: one row per node and fabric instance, ``data`` the kind's validated entries as JSON)
and ``segments.fabric`` widened to an instance name (63 chars; the default instances' names
are the old fabric values, so every stored segment keeps its meaning).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "node_fabric_ports",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False),
        sa.Column("instance", sa.String(63), nullable=False),
        sa.Column("data", sa.JSON, nullable=False),
        sa.UniqueConstraint("node_id", "instance", name="uq_node_fabric_ports_node_instance"),
    )
    op.create_index("ix_node_fabric_ports_node_id", "node_fabric_ports", ["node_id"])
    with op.batch_alter_table("segments") as t:
        t.alter_column("fabric", type_=sa.String(63), existing_type=sa.String(16), existing_nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("segments") as t:
        t.alter_column("fabric", type_=sa.String(16), existing_type=sa.String(63), existing_nullable=False)
    op.drop_index("ix_node_fabric_ports_node_id", table_name="node_fabric_ports")
    op.drop_table("node_fabric_ports")
