"""The worker's read of the store (SQLite and PostgreSQL): one transaction gives exactly what
the store's own reads give, and the inventory part is re-read when — and only when — the
inventory revision (triggers of migration 0005) moved."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpufabric.domain.models import FabricPorts, Inventory, Lease, Node, NodeState, Offering
from gpufabric.domain.moves import MoveRequest
from gpufabric.domain.values import Guid
from gpufabric.fabrics.ethernet.entries import EthernetPort, ethernet_ports
from gpufabric.fabrics.infiniband.entries import IbPort
from gpufabric.store.core import Store
from gpufabric.store.lock import bump_epoch
from gpufabric.store.moves import MoveLedger, prepared_ids
from gpufabric.store.queries import Reader
from gpufabric.store.registry import parse_segments
from gpufabric.store.view import ViewReader

from support.ports import port_node

CFG = parse_segments()


def _node(i: int, port: str = "") -> Node:
    name = f"n{i}"
    return port_node(
        name,
        ethernet=(EthernetPort(name, "eth0", "leaf1", port or f"p{i}"),),
        ib=(IbPort(name, "mlx5_0", 1, Guid(0x1000 + i), Guid(0x2000 + i)),),
    )


@pytest.fixture
def store(store_url: str) -> Store:
    s = Store.open(url=store_url)
    s.upsert_inventory(Inventory(tuple(_node(i) for i in range(1, 5))))
    s.create_tenant("ta")
    s.create_network("ta-net", "ta", CFG)
    return s


def _expected(store: Store) -> tuple[object, ...]:
    ledger = MoveLedger(store)
    with store.tx() as tx:
        ready = prepared_ids(tx.session, [m.id for m in ledger.open_moves() if m.id is not None])
    held = frozenset(m.node for m in ledger.open_moves() if m.holds_node_in_quarantine(prepared=m.id in ready))
    return (tuple(store.nodes()), tuple(store.leases(active_at=datetime.now(UTC))), tuple(store.networks()), held,
            tuple(store.offerings()))  # fmt: skip


def _got(reader: ViewReader) -> tuple[object, ...]:
    v, _ = reader.read()
    return (v.nodes, v.leases, v.networks, v.held_in_quarantine, v.offerings)


def test_a_read_equals_the_stores_reads_and_keeps_the_inventory_until_it_changes(store: Store) -> None:
    reader = ViewReader(store)
    assert _got(reader) == _expected(store) and reader.refreshed == 1
    # leases, moves, node states and the fabric epoch are read every time, from the cache's inventory
    store.create_lease(Lease("ta", "n1", datetime.now(UTC) - timedelta(minutes=1), networks=("ta-net",)))
    m2 = MoveLedger(store).request("n2", MoveRequest("ta", networks=("ta-net",)))
    assert "n2" not in reader.read()[0].held_in_quarantine  # a request alone holds nothing: not drained yet
    MoveLedger(store).mark_prepared([m2])  # its before_move passed
    store.set_node_state("n3", NodeState.MAINTENANCE)
    before = reader.read()[1]
    after = bump_epoch(store, "w1")
    view, epoch = reader.read()
    assert epoch == after != before
    assert _got(reader) == _expected(store) and reader.refreshed == 1
    assert "n2" in view.held_in_quarantine and [x.node for x in view.leases] == ["n1"]
    # each inventory change is seen on the next read
    changes = [
        lambda: store.upsert_inventory(Inventory((_node(1, port="p9"),))),  # a port moved
        lambda: store.upsert_inventory(Inventory((_node(5),))),  # a new node
        # a node with ports in the generic table only, then a change to them (its revision triggers came with 0012)
        lambda: store.upsert_inventory(Inventory((Node("n6", fabric_ports=(FabricPorts.of("mem-a", ["m1"]),)),))),
        lambda: store.upsert_inventory(Inventory((Node("n6", fabric_ports=(FabricPorts.of("mem-a", ["m2"]),)),))),
        lambda: store.create_network("ta-net2", "ta", CFG),
        lambda: store.create_offering(Offering("gpu-burst", "short jobs")),
        lambda: store.create_tenant("tb"),
    ]
    for i, change in enumerate(changes, start=2):
        change()
        assert _got(reader) == _expected(store)
        assert reader.refreshed == i
    assert {p.switch_port for n in reader.read()[0].nodes for p in ethernet_ports(n) if n.name == "n1"} == {"p9"}
    assert [n.fabric_ports for n in reader.read()[0].nodes if n.name == "n6"] == [(FabricPorts.of("mem-a", ["m2"]),)]


def test_a_change_of_a_nodes_ports_alone_moves_the_revision_the_api_caches_by(store: Store) -> None:
    """The API answers from a cache per store revision (``gf_revision`` 1): a port moved on a node
    whose other columns stay must move it (the port table's triggers of 0015), an import that
    changes nothing must not."""
    reader = Reader(store)
    before = reader.revision()
    store.upsert_inventory(Inventory((_node(1, port="p9"),)))
    moved = reader.revision()
    assert moved > before
    store.upsert_inventory(Inventory((_node(1, port="p9"),)))  # the same ports: nothing written
    assert reader.revision() == moved
