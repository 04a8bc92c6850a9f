"""Ethernet bonds: ``ethernet_ports.bond`` (the switch's aggregate interface a port is a
member of: port-channel, ``ae``, OVS bond; "" when not bonded) and ``bond_mode`` (lacp |
active-backup). Every port made before this migration is not bonded.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("ethernet_ports") as t:
        t.add_column(sa.Column("bond", sa.String(255), nullable=False, server_default=""))
        t.add_column(sa.Column("bond_mode", sa.String(16), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("ethernet_ports") as t:
        t.drop_column("bond_mode")
        t.drop_column("bond")
