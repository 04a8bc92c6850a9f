"""Every fabric kind's ports in one table: the Ethernet and InfiniBand columns move into
``node_fabric_ports`` (each node's rows of ``ethernet_ports`` become its row of the Ethernet
kind's default instance ``ethernet``, its rows of ``ib_ports`` its row of ``infiniband``; ``data``:
the entries as each kind dumps them, sorted as the store read them), and ``ethernet_ports`` and
``ib_ports`` are dropped. Their uniqueness moves to ``node_port_keys``: one row per key a node
holds (``scope``: what is unique, ``key``: its text), unique per (scope, key) — the switch
interfaces (member ports and aggregates) and the HCA port and node GUIDs. A key two nodes held
before (only node GUIDs and aggregates could be: the old tables did not constrain them) is kept
for the first node only; the next import of the other refuses it. ``node_fabric_ports`` also
gets the store-revision triggers the old tables had (0004), so the API's cache sees a changed port.

Downgrade moves the rows of the two default instances back (entries of named Ethernet
instances have no place in the old tables and are dropped) and drops ``node_port_keys``.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of what the kinds write (fabrics/ethernet/entries.py, fabrics/infiniband/entries.py):
# a migration imports no code that may change after it.
ETHERNET, INFINIBAND = "ethernet", "infiniband"  # the kinds' default instances
SWITCH_PORT, PORT_GUID, NODE_GUID = "ethernet.switch_port", "infiniband.port_guid", "infiniband.node_guid"
TABLE, KEYS = "node_fabric_ports", "node_port_keys"
REV = "UPDATE gf_revision SET n = n + 1 WHERE id = 1"
INV = "UPDATE gf_revision SET n = n + 1 WHERE id = 2"


def _ethernet(rows: Any) -> tuple[dict[int, list[dict[str, Any]]], list[tuple[int, str, str]]]:
    entries: dict[int, list[dict[str, Any]]] = {}
    keys: list[tuple[int, str, str]] = []
    for nid, name, switch, port, mac, bond, mode in rows:
        entries.setdefault(nid, []).append({"name": name, "switch": switch, "switch_port": port, **({"mac": mac} if mac else {}),
                                            **({"bond": bond, "bond_mode": mode} if bond else {})})  # fmt: skip
        keys.append((nid, SWITCH_PORT, f"{switch}/{port}"))
        if bond:
            keys.append((nid, SWITCH_PORT, f"{switch}/{bond}"))
    return entries, keys


def _ib(rows: Any) -> tuple[dict[int, list[dict[str, Any]]], list[tuple[int, str, str]]]:
    entries: dict[int, list[dict[str, Any]]] = {}
    keys: list[tuple[int, str, str]] = []
    for nid, device, num, pguid, nguid, sguid, sport, instance in rows:
        entries.setdefault(nid, []).append({"device": device, "port_num": num, "port_guid": pguid, "node_guid": nguid,
                                            **({"switch_guid": sguid} if sguid else {}),
                                            **({"switch_port": sport} if sport else {}),
                                            **({"instance": instance} if instance else {})})  # fmt: skip
        keys += [(nid, PORT_GUID, pguid), (nid, NODE_GUID, nguid)]
    return entries, keys


def _triggers(table: str, create: bool, which: tuple[str, ...] = ("rev",)) -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    for kind in which:
        fn, bump = ("gf_bump_revision", REV) if kind == "rev" else ("gf_bump_inventory", INV)
        name = f"gf_{kind}_{table}"
        if pg:
            op.execute(f"CREATE TRIGGER {name} AFTER INSERT OR UPDATE OR DELETE ON {table} FOR EACH STATEMENT"
                       f" EXECUTE FUNCTION {fn}()" if create else f"DROP TRIGGER {name} ON {table}")  # fmt: skip
            continue
        for ev in ("INSERT", "UPDATE", "DELETE"):
            op.execute(f"CREATE TRIGGER {name}_{ev.lower()} AFTER {ev} ON {table} BEGIN {bump}; END" if create
                       else f"DROP TRIGGER {name}_{ev.lower()}")  # fmt: skip


def upgrade() -> None:
    bind = op.get_bind()
    keys_table = op.create_table(
        KEYS,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("scope", sa.String(63), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.UniqueConstraint("scope", "key", name="uq_node_port_keys_scope_key"),
    )
    eth, eth_keys = _ethernet(bind.execute(sa.text(
        "SELECT node_id, name, switch, switch_port, mac, bond, bond_mode FROM ethernet_ports ORDER BY node_id, name")))
    ib, ib_keys = _ib(bind.execute(sa.text(
        "SELECT node_id, device, port_num, port_guid, node_guid, switch_guid, switch_port, instance FROM ib_ports"
        " ORDER BY node_id, device, port_num")))  # fmt: skip
    ports = sa.table(TABLE, sa.column("node_id", sa.Integer), sa.column("instance", sa.String), sa.column("data", sa.JSON))
    rows = [{"node_id": n, "instance": ETHERNET, "data": e} for n, e in sorted(eth.items())]
    rows += [{"node_id": n, "instance": INFINIBAND, "data": e} for n, e in sorted(ib.items())]
    if rows:
        op.bulk_insert(ports, rows)
    held: dict[tuple[str, str], int] = {}
    for nid, scope, key in sorted(eth_keys + ib_keys):
        held.setdefault((scope, key), nid)  # a node holds a key once; a key two nodes held: the first's
    if held:
        op.bulk_insert(keys_table, [{"node_id": n, "scope": s, "key": k} for (s, k), n in sorted(held.items())])
    op.drop_table("ethernet_ports")
    op.drop_table("ib_ports")
    _triggers(TABLE, create=True)


def downgrade() -> None:
    bind = op.get_bind()
    _triggers(TABLE, create=False)
    op.drop_table(KEYS)
    eth = op.create_table(
        "ethernet_ports",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("switch", sa.String(255), nullable=False),
        sa.Column("switch_port", sa.String(255), nullable=False),
        sa.Column("mac", sa.String(17), nullable=False),
        sa.Column("bond", sa.String(255), nullable=False, server_default=""),
        sa.Column("bond_mode", sa.String(16), nullable=False, server_default=""),
        sa.UniqueConstraint("switch", "switch_port", name="uq_ethernet_ports_switch_port"),
        sa.UniqueConstraint("node_id", "name", name="uq_ethernet_ports_node_name"),
    )
    ib = op.create_table(
        "ib_ports",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("device", sa.String(63), nullable=False),
        sa.Column("port_num", sa.Integer, nullable=False),
        sa.Column("port_guid", sa.String(18), nullable=False, unique=True),
        sa.Column("node_guid", sa.String(18), nullable=False),
        sa.Column("switch_guid", sa.String(18), nullable=True),
        sa.Column("switch_port", sa.Integer, nullable=True),
        sa.Column("instance", sa.String(63), nullable=True),
        sa.UniqueConstraint("node_id", "device", "port_num", name="uq_ib_ports_node_device_port"),
    )
    q = sa.text(f"SELECT node_id, instance, data FROM {TABLE} WHERE instance IN (:e, :i) ORDER BY node_id")
    eth_rows, ib_rows = [], []
    for nid, instance, data in bind.execute(q, {"e": ETHERNET, "i": INFINIBAND}):
        for e in json.loads(data) if isinstance(data, str) else data:
            if instance == ETHERNET:
                eth_rows.append({"node_id": nid, "name": e["name"], "switch": e["switch"], "switch_port": e["switch_port"],
                                 "mac": e.get("mac", ""), "bond": e.get("bond", ""), "bond_mode": e.get("bond_mode", "")})
            else:
                ib_rows.append({"node_id": nid, "device": e["device"], "port_num": e.get("port_num", 1),
                                "port_guid": e["port_guid"], "node_guid": e["node_guid"], "switch_guid": e.get("switch_guid"),
                                "switch_port": e.get("switch_port"), "instance": e.get("instance") or None})  # fmt: skip
    if eth_rows:
        op.bulk_insert(eth, eth_rows)
    if ib_rows:
        op.bulk_insert(ib, ib_rows)
    op.execute(sa.text(f"DELETE FROM {TABLE} WHERE instance IN (:e, :i)").bindparams(e=ETHERNET, i=INFINIBAND))
    for t in ("ethernet_ports", "ib_ports"):
        _triggers(t, create=True, which=("rev", "inv"))
