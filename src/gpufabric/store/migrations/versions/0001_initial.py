"""Initial schema: inventory, tenants, networks with segments, offerings, leases, moves.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)


def _node_fk() -> sa.Column[int]:
    return sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id", ondelete="CASCADE"), nullable=False, index=True)


def upgrade() -> None:
    op.create_table(
        "nodes",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(63), nullable=False, unique=True),
        sa.Column("offering", sa.String(63), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
    )
    op.create_table(
        "ethernet_ports",
        sa.Column("id", sa.Integer, primary_key=True),
        _node_fk(),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("switch", sa.String(255), nullable=False),
        sa.Column("switch_port", sa.String(255), nullable=False),
        sa.Column("mac", sa.String(17), nullable=False),
        sa.UniqueConstraint("switch", "switch_port", name="uq_ethernet_ports_switch_port"),
        sa.UniqueConstraint("node_id", "name", name="uq_ethernet_ports_node_name"),
    )
    op.create_table(
        "ib_ports",
        sa.Column("id", sa.Integer, primary_key=True),
        _node_fk(),
        sa.Column("device", sa.String(63), nullable=False),
        sa.Column("port_num", sa.Integer, nullable=False),
        sa.Column("port_guid", sa.String(18), nullable=False, unique=True),
        sa.Column("node_guid", sa.String(18), nullable=False),
        sa.Column("switch_guid", sa.String(18), nullable=True),
        sa.Column("switch_port", sa.Integer, nullable=True),
        sa.UniqueConstraint("node_id", "device", "port_num", name="uq_ib_ports_node_device_port"),
    )
    op.create_table(
        "gpus",
        sa.Column("id", sa.Integer, primary_key=True),
        _node_fk(),
        sa.Column("module_id", sa.Integer, nullable=False),
        sa.Column("pci_bus_id", sa.String(32), nullable=False),
        sa.UniqueConstraint("node_id", "module_id", name="uq_gpus_node_module"),
    )
    op.create_table(
        "dpus",
        sa.Column("id", sa.Integer, primary_key=True),
        _node_fk(),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.UniqueConstraint("node_id", "name", name="uq_dpus_node_name"),
    )
    op.create_table(
        "tenants",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(63), nullable=False, unique=True),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "networks",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(63), nullable=False, unique=True),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey("tenants.id"), nullable=False, index=True),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "segments",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "network_id", sa.Integer, sa.ForeignKey("networks.id", ondelete="CASCADE"), nullable=False, index=True
        ),
        sa.Column("fabric", sa.String(16), nullable=False),
        sa.Column("seg_id", sa.Integer, nullable=False),
        sa.Column("vlan", sa.Integer, nullable=True, unique=True),
        sa.Column("pkey", sa.Integer, nullable=True, unique=True),
        sa.UniqueConstraint("fabric", "seg_id", name="uq_segments_fabric_seg_id"),
        sa.UniqueConstraint("network_id", "fabric", name="uq_segments_network_fabric"),
    )
    op.create_table(
        "offerings",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(63), nullable=False, unique=True),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("dpu_mode", sa.String(16), nullable=False),
        sa.Column("settings", sa.JSON, nullable=False),
    )
    op.create_table(
        "leases",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey("tenants.id"), nullable=False, index=True),
        sa.Column("node_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=False, index=True),
        sa.Column("start", TS, nullable=False),
        sa.Column("end", TS, nullable=True),
        sa.Column("offering", sa.String(63), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "lease_networks",
        sa.Column("lease_id", sa.Integer, sa.ForeignKey("leases.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("network_id", sa.Integer, sa.ForeignKey("networks.id"), primary_key=True, index=True),
    )
    op.create_table(
        "moves",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("node", sa.String(63), nullable=False, index=True),
        sa.Column("from_tenant", sa.String(63), nullable=False),
        sa.Column("to_tenant", sa.String(63), nullable=False),
        sa.Column("offering", sa.String(63), nullable=False),
        sa.Column("phase", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("error", sa.Text, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("claimed_by", sa.String(255), nullable=True),
        sa.Column("claimed_at", TS, nullable=True),
    )


def downgrade() -> None:
    for table in (
        "moves",
        "lease_networks",
        "leases",
        "offerings",
        "segments",
        "networks",
        "tenants",
        "dpus",
        "gpus",
        "ib_ports",
        "ethernet_ports",
        "nodes",
    ):
        op.drop_table(table)
