"""A kind format's import is one unit of work (issue 31's leftovers, item 1): the known nodes the
format judges and the write are read and made in one transaction, so a lease (or another import)
landing while the text is read waits for the import instead of slipping between its read and its
write. Run the way ``gpufabric inventory import FILE --format ibnetdiscover`` runs on a store
(``cli.backends.local.Local.import_format``), on SQLite, where the transaction's ``BEGIN IMMEDIATE``
holds the write lock from the read on, and on PostgreSQL (READ COMMITTED), where the node rows
read are locked ``FOR UPDATE``; the lease comes through another connection, in a thread."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from gpufabric.api.app import create_app
from gpufabric.cli.backends.local import Local
from gpufabric.cli.common import close_stores
from gpufabric.domain.errors import ConflictError
from gpufabric.domain.hooks import ImportFormat, ImportReport, ImportRequest
from gpufabric.domain.models import Inventory, Node, NodeState
from gpufabric.fabrics.infiniband.entries import all_ib_ports
from gpufabric.fabrics.infiniband.inventory.importer import import_format
from gpufabric.store.core import Store
from gpufabric.workflow import kind_import

from support.api_world import build_world

TOPO = (Path(__file__).parents[1] / "fixtures" / "ibnetdiscover" / "lab-6x2-sm.topology.txt").read_text()
NEW = "0x0002c903100001f1"  # gpu-a01's second HCA, replaced (as in test_ib_reimport)
SWAPPED = TOPO.replace("2c90310000111", "2c903100001f1")


@pytest.fixture
def url(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    db = store_url
    monkeypatch.setenv("GPUFABRIC_HOME", str(tmp_path))  # no fabrics.yaml: the format's defaults
    monkeypatch.setenv("GPUFABRIC_DB", db)
    close_stores()
    Local().import_format("ibnetdiscover", import_format(), TOPO, None, False)
    yield db
    close_stores()


def racing(other: Store, order: list[str]) -> tuple[ImportFormat, threading.Thread]:
    """The ibnetdiscover format whose read, once it has the known nodes, has ``other`` (another
    replica's connection) lease gpu-a01 in a thread, and notes whether that lease had to wait."""
    real = import_format()

    def lease() -> None:
        other.set_node_state("gpu-a01", NodeState.LEASED)  # what a grant's move does to the node row
        order.append("lease")

    racer = threading.Thread(target=lease)

    def read(req: ImportRequest) -> ImportReport:
        def known() -> Sequence[Node]:
            nodes = req.known()
            assert {n.name: n.state for n in nodes}["gpu-a01"] is NodeState.AVAILABLE
            racer.start()
            racer.join(0.5)  # lands now unless the read's transaction holds the store
            order.append("lease waits" if racer.is_alive() else "lease landed")
            return nodes

        return real.read(dataclasses.replace(req, known=known))

    return ImportFormat(real.name, read), racer


def test_a_lease_landing_while_the_text_is_read_waits_for_the_import(url: str) -> None:
    """gpu-a01 is available when the format reads the known nodes; another replica leases it at
    that moment. The import writes what it judged (the confirmed new HCA), then the lease lands:
    before, the lease slipped in between and the write was refused (``node gpu-a01 is leased``)."""
    order: list[str] = []
    other = Store.open(url)
    fmt, racer = racing(other, order)
    try:
        started = time.monotonic()
        doc = Local().import_format("ibnetdiscover", fmt, SWAPPED, None, False, (f"{NEW}=gpu-a01",))
        racer.join(30)
        assert order == ["lease waits", "lease"], order  # the lease landed once the import committed
        assert doc["result"]["updated"] == 1 and doc["pending"] == []
        after = other.node("gpu-a01")
        assert after.state is NodeState.LEASED and NEW in {str(p.port_guid) for p in all_ib_ports(after)}
        with other.engine.connect() as conn:  # the import's audit event, committed with its write
            events = list(conn.exec_driver_sql("SELECT target, outcome FROM events WHERE action = 'inventory.import'"))
        assert [tuple(e) for e in events] == [("7 nodes", "ok")] * 2 and time.monotonic() - started < 30
    finally:
        other.close()


def test_the_api_imports_in_one_transaction_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``POST /api/v1/inventory/{format}`` runs the same unit of work (``kind_import.imported``)."""
    w = build_world(tmp_path, nodes=2, leased=0)
    client = TestClient(create_app(w.ctx))
    h = {**w.headers("admin"), "Content-Type": "text/plain"}
    assert client.post("/api/v1/inventory/ibnetdiscover", content=TOPO, headers=h).status_code == 200
    order: list[str] = []
    other = Store.open(w.store.url)
    fmt, racer = racing(other, order)
    monkeypatch.setattr(kind_import, "find", lambda name, registry=None: fmt)
    try:
        r = client.post("/api/v1/inventory/ibnetdiscover", params={"confirm": f"{NEW}=gpu-a01"}, content=SWAPPED,
                        headers=h)  # fmt: skip
        racer.join(30)
        assert r.status_code == 200, r.text
        assert order == ["lease waits", "lease"] and r.json()["result"]["updated"] == 1
        assert other.node("gpu-a01").state is NodeState.LEASED
    finally:
        other.close()
        w.store.close()


def test_a_refused_import_writes_nothing_and_records_its_refusal(url: str) -> None:
    """The store's refusal (here: a format that lists gpu-a01 twice, after a new node) rolls the
    unit of work back, and the refusal is recorded after it, in a transaction of its own (no
    wait on the import's own lock)."""
    other = Store.open(url)

    def read(req: ImportRequest) -> ImportReport:
        known = {n.name: n for n in req.known()}
        return ImportReport(Inventory((Node("gpu-new", "baremetal"), known["gpu-a01"], known["gpu-a01"])))

    try:
        before = other.nodes()
        started = time.monotonic()
        with pytest.raises(ConflictError):
            Local().import_format("ibnetdiscover", ImportFormat("ibnetdiscover", read), TOPO, None, False)
        assert time.monotonic() - started < 10 and other.nodes() == before
        with other.engine.connect() as conn:
            events = list(conn.exec_driver_sql("SELECT outcome FROM events WHERE action = 'inventory.import'"))
        assert [e[0] for e in events] == ["ok", "error"]
    finally:
        other.close()
