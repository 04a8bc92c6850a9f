"""Migration 0004 on a store with data: network names become unique per tenant without
losing a segment or a lease's networks (SQLite rebuilds the table with foreign keys off)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from sqlalchemy import create_engine, text

from gpufabric.store import db
from gpufabric.store.core import Store
from gpufabric.store.registry import parse_segments


def test_upgrade_from_0003_keeps_segments_and_lease_networks(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    engine = db.make_engine(url)
    with engine.begin() as conn:
        cfg = db._config()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0003")
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO tenants (id, name, created_at) VALUES (1, 'alpha', '2026-01-01')")
        conn.exec_driver_sql("INSERT INTO networks (id, name, tenant_id, created_at) VALUES (1, 'n1', 1, '2026-01-01')")
        conn.exec_driver_sql("INSERT INTO segments (network_id, fabric, seg_id, vlan) VALUES (1, 'ethernet', 2001, 2001)")
        conn.exec_driver_sql("INSERT INTO nodes (id, name, offering, state) VALUES (1, 'gpu-1', '', 'leased')")
        conn.exec_driver_sql(
            "INSERT INTO leases (id, tenant_id, node_id, start, offering, owner, created_at)"
            " VALUES (1, 1, 1, '2026-01-01', 'baremetal', 'admin', '2026-01-01')"
        )
        conn.exec_driver_sql("INSERT INTO lease_networks (lease_id, network_id) VALUES (1, 1)")
    engine.dispose()
    with Store.open(url) as s:
        net = s.network("n1", "alpha")
        seg = net.segment("ethernet")
        assert seg is not None and seg.seg_id == 2001
        assert s.lease(1).networks == ("n1",)
        s.create_tenant("beta")
        other = s.create_network("n1", "beta", parse_segments())  # same name, other tenant
        assert other.tenant == "beta"
    check = create_engine(url)
    with check.connect() as c:
        assert c.execute(text("PRAGMA foreign_keys")).scalar() == 0  # a fresh connection's default
        assert c.execute(text("SELECT version_num FROM alembic_version")).scalar() == db.HEAD_REVISION
    check.dispose()
