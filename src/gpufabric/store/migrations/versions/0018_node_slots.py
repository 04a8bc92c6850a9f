"""Slots of shared hosts (issue 33): a slot is a node whose ``nodes.host`` names the host it is
carved from (``''``: not a slot) and ``nodes.slot_modules`` the GPU module ids it holds (a JSON
list, ``[]``: none). Existing nodes are no slots. Downgrade drops both columns (and with them
what made a slot a slot: delete the slots first).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("nodes", sa.Column("host", sa.String(63), nullable=False, server_default=""))
    op.add_column("nodes", sa.Column("slot_modules", sa.JSON, nullable=False, server_default="[]"))


def downgrade() -> None:
    op.drop_column("nodes", "slot_modules")
    op.drop_column("nodes", "host")
