"""The DPU kind's column moves into the generic port table: each node's rows of ``dpus`` become
its ``node_fabric_ports`` row of the kind's default instance (``data``: the entries
``[{name, mode, <detail>: <value>, ...}]`` sorted by name, as the kind dumps them), and the
``dpus`` table is dropped. ``node_fabric_ports`` gets the inventory-revision triggers of the
other port tables (0005), which it lacked: a warm worker now sees a changed generic port.
Downgrade moves the rows back.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INSTANCE = "dpu"  # the DPU kind's default instance (fabrics/dpu/entries.KIND), where a node's dpus: go
TABLE = "node_fabric_ports"
BUMP = "UPDATE gf_revision SET n = n + 1 WHERE id = 2"


def _details(raw: Any) -> dict[str, str]:
    d = json.loads(raw) if isinstance(raw, str) else (raw or {})
    return {str(k): str(v) for k, v in d.items()}


def upgrade() -> None:
    bind = op.get_bind()
    ports = sa.table(TABLE, sa.column("node_id", sa.Integer), sa.column("instance", sa.String), sa.column("data", sa.JSON))
    entries: dict[int, list[dict[str, str]]] = {}
    for nid, name, mode, details in bind.execute(sa.text("SELECT node_id, name, mode, details FROM dpus ORDER BY node_id, name")):
        entries.setdefault(nid, []).append({"name": name, "mode": mode, **_details(details)})
    if entries:
        op.bulk_insert(ports, [{"node_id": nid, "instance": INSTANCE, "data": e} for nid, e in sorted(entries.items())])
    op.drop_table("dpus")
    if bind.dialect.name == "postgresql":
        op.execute(f"CREATE TRIGGER gf_inv_{TABLE} AFTER INSERT OR UPDATE OR DELETE ON {TABLE}"
                   " FOR EACH STATEMENT EXECUTE FUNCTION gf_bump_inventory()")  # fmt: skip
        return
    for ev in ("INSERT", "UPDATE", "DELETE"):
        op.execute(f"CREATE TRIGGER gf_inv_{TABLE}_{ev.lower()} AFTER {ev} ON {TABLE} BEGIN {BUMP}; END")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute(f"DROP TRIGGER gf_inv_{TABLE} ON {TABLE}")
    else:
        for ev in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER gf_inv_{TABLE}_{ev}")
    old = op.create_table(
        "dpus",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("details", sa.JSON, nullable=False, server_default="{}"),
        sa.UniqueConstraint("node_id", "name", name="uq_dpus_node_name"),
    )
    rows = []
    q = sa.text(f"SELECT node_id, data FROM {TABLE} WHERE instance = :i ORDER BY node_id")
    for nid, data in bind.execute(q, {"i": INSTANCE}):
        for e in json.loads(data) if isinstance(data, str) else data:
            rest = {k: v for k, v in e.items() if k not in ("name", "mode")}
            rows.append({"node_id": nid, "name": e["name"], "mode": e.get("mode", "full"), "details": rest})
    if rows:
        op.bulk_insert(old, rows)
    op.execute(sa.text(f"DELETE FROM {TABLE} WHERE instance = :i").bindparams(i=INSTANCE))
    if bind.dialect.name == "postgresql":  # the triggers 0005 gave dpus
        op.execute("CREATE TRIGGER gf_inv_dpus AFTER INSERT OR UPDATE OR DELETE ON dpus"
                   " FOR EACH STATEMENT EXECUTE FUNCTION gf_bump_inventory()")  # fmt: skip
        return
    for ev in ("INSERT", "UPDATE", "DELETE"):
        op.execute(f"CREATE TRIGGER gf_inv_dpus_{ev.lower()} AFTER {ev} ON dpus BEGIN {BUMP}; END")
