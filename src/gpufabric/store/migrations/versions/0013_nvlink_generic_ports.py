"""The NVLink kind's column moves into the generic port table: each node's rows of ``gpus``
become its ``node_fabric_ports`` row of the kind's default instance (``data``: the entries
``[{module_id, pci_bus_id?}, ...]`` by module id, as the kind dumps them), and the ``gpus``
table is dropped. Downgrade moves the rows back (with the table's 0005 revision triggers).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INSTANCE = "nvlink"  # the NVLink kind's default instance (fabrics/nvlink/state.FABRIC), where a node's gpus: go
TABLE = "node_fabric_ports"
BUMP = "UPDATE gf_revision SET n = n + 1 WHERE id = 2"


def upgrade() -> None:
    bind = op.get_bind()
    ports = sa.table(TABLE, sa.column("node_id", sa.Integer), sa.column("instance", sa.String), sa.column("data", sa.JSON))
    entries: dict[int, list[dict[str, object]]] = {}
    for nid, module, bus in bind.execute(sa.text("SELECT node_id, module_id, pci_bus_id FROM gpus ORDER BY node_id, module_id")):
        entries.setdefault(nid, []).append({"module_id": int(module), **({"pci_bus_id": bus} if bus else {})})
    if entries:
        op.bulk_insert(ports, [{"node_id": nid, "instance": INSTANCE, "data": e} for nid, e in sorted(entries.items())])
    op.drop_table("gpus")


def downgrade() -> None:
    bind = op.get_bind()
    old = op.create_table(
        "gpus",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("module_id", sa.Integer, nullable=False),
        sa.Column("pci_bus_id", sa.String(32), nullable=False),
        sa.UniqueConstraint("node_id", "module_id", name="uq_gpus_node_module"),
    )
    rows = []
    q = sa.text(f"SELECT node_id, data FROM {TABLE} WHERE instance = :i ORDER BY node_id")
    for nid, data in bind.execute(q, {"i": INSTANCE}):
        for e in json.loads(data) if isinstance(data, str) else data:
            rows.append({"node_id": nid, "module_id": int(e["module_id"]), "pci_bus_id": e.get("pci_bus_id", "")})
    if rows:
        op.bulk_insert(old, rows)
    op.execute(sa.text(f"DELETE FROM {TABLE} WHERE instance = :i").bindparams(i=INSTANCE))
    if bind.dialect.name == "postgresql":  # the triggers 0005 gave gpus
        op.execute("CREATE TRIGGER gf_inv_gpus AFTER INSERT OR UPDATE OR DELETE ON gpus"
                   " FOR EACH STATEMENT EXECUTE FUNCTION gf_bump_inventory()")  # fmt: skip
        return
    for ev in ("INSERT", "UPDATE", "DELETE"):
        op.execute(f"CREATE TRIGGER gf_inv_gpus_{ev.lower()} AFTER {ev} ON gpus BEGIN {BUMP}; END")
