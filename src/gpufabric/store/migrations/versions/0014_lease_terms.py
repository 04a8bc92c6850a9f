"""A lease's terms and an offering's settings are the fabric kinds', stored generically:

* ``leases.terms`` and ``moves.terms`` (JSON objects, ``{}``: none) carry what the kinds' declared
  lease terms ask for (``FabricKind.lease_terms``); the GPU count of the NVLink kind, until now
  the ``gpus`` column of both tables, becomes the term ``{"gpus": n}`` and the columns go;
* ``offerings.dpu_mode`` becomes the DPU kind's setting of the offering: the pair
  ``["dpu_mode", mode]`` first in its ``settings`` (left out for ``full``, the value when unset),
  and the column goes.

Downgrade puts both back (a term or setting the old columns cannot hold is dropped). The
columns are dropped with ``ALTER TABLE ... DROP COLUMN`` on SQLite too (3.35+, which the store
already needs for ``UPDATE ... RETURNING``): no table is rebuilt, so ids, sequences and the
rows referring to leases and moves stay as they are.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COUNT = "gpus"  # the NVLink kind's lease term (fabrics/nvlink/kind.GPUS): the old column's name and the term's
MODE = "dpu_mode"  # the DPU kind's offering setting (fabrics/dpu/entries.MODE_SETTING): the old column's and the key's
MODE_UNSET = "full"  # the mode an offering without the setting has (DpuKind.offering_settings)
TABLES = ("leases", "moves")


def _terms_table(name: str) -> sa.TableClause:
    return sa.table(name, sa.column("id", sa.Integer), sa.column("terms", sa.JSON), sa.column(COUNT, sa.Integer))


def _offerings() -> sa.TableClause:
    return sa.table("offerings", sa.column("id", sa.Integer), sa.column("settings", sa.JSON), sa.column(MODE, sa.String))


def _pairs(settings: Any) -> list[list[str]]:
    return [list(kv) for kv in settings or [] if kv and kv[0] != MODE]


def upgrade() -> None:
    bind = op.get_bind()
    for name in TABLES:
        op.add_column(name, sa.Column("terms", sa.JSON, nullable=False, server_default="{}"))
        t = _terms_table(name)
        for row_id, n in bind.execute(sa.select(t.c.id, t.c[COUNT]).where(t.c[COUNT].is_not(None))).all():
            bind.execute(t.update().where(t.c.id == row_id).values(terms={COUNT: int(n)}))
        op.drop_column(name, COUNT)
    o = _offerings()
    for row_id, mode, settings in bind.execute(sa.select(o.c.id, o.c[MODE], o.c.settings)).all():
        pairs = ([[MODE, str(mode)]] if mode and mode != MODE_UNSET else []) + _pairs(settings)
        if pairs != list(settings or []):
            bind.execute(o.update().where(o.c.id == row_id).values(settings=pairs))
    op.drop_column("offerings", MODE)


def downgrade() -> None:
    bind = op.get_bind()
    op.add_column("offerings", sa.Column(MODE, sa.String(16), nullable=False, server_default=MODE_UNSET))
    o = _offerings()
    for row_id, settings in bind.execute(sa.select(o.c.id, o.c.settings)).all():
        mode = next((str(kv[1]) for kv in settings or [] if kv and kv[0] == MODE), MODE_UNSET)
        bind.execute(o.update().where(o.c.id == row_id).values(**{MODE: mode, "settings": _pairs(settings)}))
    for name in TABLES:
        op.add_column(name, sa.Column(COUNT, sa.Integer, nullable=True))
        t = _terms_table(name)
        for row_id, terms in bind.execute(sa.select(t.c.id, t.c.terms)).all():
            n = (terms or {}).get(COUNT)
            if n is not None:
                bind.execute(t.update().where(t.c.id == row_id).values(**{COUNT: int(n)}))
        op.drop_column(name, "terms")
