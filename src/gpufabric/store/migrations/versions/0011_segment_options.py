"""A network's own settings per fabric instance: ``segments.options`` (JSON text of the
mapping its kind validated, e.g. an InfiniBand network's IPoIB ``{"mtu": 5}``; NULL: none, as
for every segment stored before this revision).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("segments") as t:
        t.add_column(sa.Column("options", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("segments") as t:
        t.drop_column("options")
