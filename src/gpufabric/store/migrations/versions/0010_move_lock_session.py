"""A running move names the PostgreSQL session holding the fabric lock for it:
``moves.lock_session`` (the backend PID of its worker's fabric-lock connection; NULL on SQLite,
before the worker holds the lock, and for every move stored before this revision). A watcher
that sees that session gone takes the move over after one missed heartbeat instead of three.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("moves") as t:
        t.add_column(sa.Column("lock_session", sa.Integer, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("moves") as t:
        t.drop_column("lock_session")
