"""InfiniBand ports belong to a fabric instance (a subnet): ``ib_ports.instance`` (NULL: the
kind's default instance, named after the kind, so every stored port keeps its meaning).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("ib_ports") as t:
        t.add_column(sa.Column("instance", sa.String(63), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ib_ports") as t:
        t.drop_column("instance")
