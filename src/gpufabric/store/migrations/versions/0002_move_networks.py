"""Moves remember the networks the node joins in its new lease.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("moves") as b:
        b.add_column(sa.Column("networks", sa.Text, nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("moves") as b:
        b.drop_column("networks")
