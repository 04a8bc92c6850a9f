"""A network segment's own id is its kind's: ``segments.vlan`` and ``segments.pkey`` (each unique)
become ``segments.key`` with its ``scope`` (the kind's name for what the key is), unique per
(scope, key): a VLAN is the key of scope ``ethernet.vlan``, a 15-bit PKey of ``infiniband.pkey``,
as the two kinds write them (``fabrics/ethernet/segments.py``, ``fabrics/infiniband/segments.py``).
VLANs and PKeys stay unique deployment-wide, and a new kind's segments are unique the same way.
Downgrade puts both columns back from the two scopes (a key of any other scope has no column
there and is dropped).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

VLAN, PKEY = "ethernet.vlan", "infiniband.pkey"  # frozen copies of the kinds' scopes


def upgrade() -> None:
    with op.batch_alter_table("segments") as t:
        t.add_column(sa.Column("scope", sa.String(63), nullable=True))
        t.add_column(sa.Column("key", sa.Integer, nullable=True))
    op.execute(sa.text("UPDATE segments SET scope = :s, key = vlan WHERE vlan IS NOT NULL").bindparams(s=VLAN))
    op.execute(sa.text("UPDATE segments SET scope = :s, key = pkey WHERE pkey IS NOT NULL").bindparams(s=PKEY))
    with op.batch_alter_table("segments", recreate="always") as t:
        t.drop_column("vlan")
        t.drop_column("pkey")
        t.create_unique_constraint("uq_segments_scope_key", ["scope", "key"])


def downgrade() -> None:
    with op.batch_alter_table("segments") as t:
        t.add_column(sa.Column("vlan", sa.Integer, nullable=True))
        t.add_column(sa.Column("pkey", sa.Integer, nullable=True))
    op.execute(sa.text("UPDATE segments SET vlan = key WHERE scope = :s").bindparams(s=VLAN))
    op.execute(sa.text("UPDATE segments SET pkey = key WHERE scope = :s").bindparams(s=PKEY))
    with op.batch_alter_table("segments", recreate="always") as t:
        t.drop_constraint("uq_segments_scope_key", type_="unique")
        t.drop_column("scope")
        t.drop_column("key")
        t.create_unique_constraint("segments_vlan_key", ["vlan"])
        t.create_unique_constraint("segments_pkey_key", ["pkey"])
