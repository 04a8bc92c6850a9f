"""An inventory revision: a second ``gf_revision`` row (id 2), bumped by triggers on every
write to what a node's ports/GPUs/DPUs, a network's segments and the offerings are read from.
A warm worker caches that slow-changing part of its desired-state inputs per revision and
re-reads only node states, leases and open moves before each converge phase.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INVENTORY = ("ethernet_ports", "ib_ports", "gpus", "dpus", "tenants", "networks", "segments", "offerings")


def upgrade() -> None:
    op.execute("INSERT INTO gf_revision (id, n) VALUES (2, 0)")
    bump = "UPDATE gf_revision SET n = n + 1 WHERE id = 2"
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION gf_bump_inventory() RETURNS trigger AS $$ BEGIN " + bump + "; RETURN NULL; END $$"
            " LANGUAGE plpgsql"
        )
        for t in INVENTORY:
            op.execute(
                f"CREATE TRIGGER gf_inv_{t} AFTER INSERT OR UPDATE OR DELETE ON {t}"
                " FOR EACH STATEMENT EXECUTE FUNCTION gf_bump_inventory()"
            )
        return
    for t in INVENTORY:
        for ev in ("INSERT", "UPDATE", "DELETE"):
            op.execute(f"CREATE TRIGGER gf_inv_{t}_{ev.lower()} AFTER {ev} ON {t} BEGIN {bump}; END")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for t in INVENTORY:
            op.execute(f"DROP TRIGGER gf_inv_{t} ON {t}")
        op.execute("DROP FUNCTION gf_bump_inventory()")
    else:
        for t in INVENTORY:
            for ev in ("insert", "update", "delete"):
                op.execute(f"DROP TRIGGER gf_inv_{t}_{ev}")
    op.execute("DELETE FROM gf_revision WHERE id = 2")
