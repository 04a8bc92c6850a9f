"""A network's own description and tags (issue 31, NCP SDN01-03: a tenant network is updated, not
only created and deleted): ``networks.description`` (text, ``''``: none) and ``networks.tags`` (a
JSON list of strings, ``[]``: none), both set by ``network create`` and ``PATCH
/api/v1/networks/{tenant}/{name}``. Existing networks get neither. Downgrade drops both columns
(what they held is lost: no older column holds it).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("networks", sa.Column("description", sa.Text, nullable=False, server_default=""))
    op.add_column("networks", sa.Column("tags", sa.JSON, nullable=False, server_default="[]"))


def downgrade() -> None:
    op.drop_column("networks", "tags")
    op.drop_column("networks", "description")
