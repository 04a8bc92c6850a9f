"""Store.nodes() reads nodes with plain SELECTs: the same Node values as the ORM conversion."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from gpufabric.domain.models import Inventory, Node, NodeState
from gpufabric.domain.values import Guid, ModuleId
from gpufabric.fabrics.dpu.entries import Dpu, DpuMode, dpu_ports
from gpufabric.fabrics.ethernet.entries import EthernetPort
from gpufabric.fabrics.infiniband.entries import IbPort
from gpufabric.fabrics.nvlink.entries import Gpu, gpu_ports
from gpufabric.store.convert import node_to_domain
from gpufabric.store.core import _NODE_LOAD, Store
from gpufabric.store.tables import NodeRow

from support.ports import port_node


def _node(i: int) -> Node:
    n = f"n{i:03d}"
    return port_node(
        n,
        offering="baremetal" if i % 2 else "",
        ethernet=tuple(EthernetPort(n, f"eth{k}", f"leaf{i % 3}", f"p{i}-{k}", f"02:00:00:00:{i:02x}:{k:02x}") for k in (1, 0)),
        ib=tuple(
            IbPort(n, f"mlx5_{k}", 1, Guid(0x1000 + i * 16 + k), Guid(0x9000 + i * 16 + k),
                   Guid(0xAAAA) if k else None, k or None)
            for k in (1, 0)
        ),
        fabric_ports=(
            *(dpu_ports(Dpu(n, "bf3", DpuMode.DPU, (("pf", "p0"), ("vfs", "8")))) if i % 4 == 0 else ()),
            *(gpu_ports(*(Gpu(n, ModuleId(m), f"0000:{m:02x}:00.0") for m in (2, 1))) if i % 3 == 0 else ()),
        ),
    )


def test_nodes_equal_orm_conversion(tmp_path: Path) -> None:
    with Store.open(f"sqlite:///{tmp_path / 'x.db'}") as store:
        store.upsert_inventory(Inventory(tuple(_node(i) for i in (5, 3, 12, 8, 0))))
        store.set_node_state("n003", NodeState.LEASED)
        fast = store.nodes()
        with store.tx() as tx:
            s = tx.session
            slow = [node_to_domain(r) for r in s.scalars(select(NodeRow).options(*_NODE_LOAD).order_by(NodeRow.name))]
    assert fast == slow
    assert [n.name for n in fast] == ["n000", "n003", "n005", "n008", "n012"]
    assert fast[1].state is NodeState.LEASED and [p.instance for p in fast[0].fabric_ports] == ["dpu", "ethernet", "infiniband", "nvlink"]


def test_leases_equal_orm_conversion(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from gpufabric.domain.models import Lease
    from gpufabric.store.convert import lease_to_domain
    from gpufabric.store.leases import _LOAD
    from gpufabric.store.registry import parse_segments
    from gpufabric.store.tables import LeaseRow

    now = datetime.now(UTC)
    with Store.open(f"sqlite:///{tmp_path / 'x.db'}") as store:
        store.upsert_inventory(Inventory(tuple(_node(i) for i in range(4))))
        cfg = parse_segments()
        for t in ("acme", "beta"):
            store.create_tenant(t)
            store.create_network(f"{t}-a", t, cfg)
            store.create_network(f"{t}-b", t, cfg)
        store.create_lease(Lease("acme", "n000", now - timedelta(hours=2), now - timedelta(hours=1), ("acme-a",)))
        store.create_lease(Lease("acme", "n000", now - timedelta(minutes=5), None, ("acme-b", "acme-a"), terms=(("gpus", 4),)))
        store.create_lease(Lease("beta", "n001", now - timedelta(minutes=9), now + timedelta(days=1), ()))
        store.create_lease(Lease("beta", "n002", now + timedelta(hours=1), None, ("beta-b",), "openstack"))
        for at in (None, now):
            fast = store.leases(active_at=at)
            with store.tx() as tx:
                s = tx.session
                q = select(LeaseRow).options(*_LOAD).order_by(LeaseRow.start, LeaseRow.id)
                if at is not None:
                    q = q.where(LeaseRow.start <= at, (LeaseRow.end.is_(None)) | (LeaseRow.end > at))
                slow = [lease_to_domain(r) for r in s.scalars(q)]
            assert fast == slow
        assert [(x.node, x.networks, x.term("gpus")) for x in store.leases(active_at=now)] == [
            ("n001", (), None), ("n000", ("acme-a", "acme-b"), 4)
        ]
