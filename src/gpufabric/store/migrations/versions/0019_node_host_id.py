"""A node's identity in an outside inventory (issue 34 item 2): ``nodes.host_id``, what
Neutron's ``binding:host_id`` names for it (Ironic's node UUID), written by ``inventory import
--from ironic``; NULL: none. Unique: one node per host id. The Neutron driver finds the node
by it (``GET /api/v1/nodes?host_id=``), so no hand-written ``node_map`` is needed. Downgrade
drops the column (what it held is lost; the import writes it again).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("nodes", sa.Column("host_id", sa.String(255), nullable=True))
    op.create_index("uq_nodes_host_id", "nodes", ["host_id"], unique=True)  # NULLs: many


def downgrade() -> None:
    op.drop_index("uq_nodes_host_id", table_name="nodes")
    op.drop_column("nodes", "host_id")
