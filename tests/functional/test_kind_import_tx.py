"""A kind format's import is one unit of work (issue 31's leftovers, item 1): the known nodes the
format judges and the write are read and made in one transaction, so a lease (or another import)
landing while the text is read waits for the import instead of slipping between its read and its
write. Run the way ``gpufabric inventory import FILE --format ibnetdiscover`` runs on a store
(``cli.backends.local.Local.import_format``), on SQLite, where the transaction's ``BEGIN IMMEDIATE``
holds the write lock from the read on; the lease comes through another connection, in a thread."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from gpufabric.cli.backends.local import Local
from gpufabric.cli.common import close_stores
from gpufabric.domain.hooks import ImportFormat, ImportReport, ImportRequest
from gpufabric.domain.models import Node, NodeState
from gpufabric.fabrics.infiniband.entries import all_ib_ports
from gpufabric.fabrics.infiniband.inventory.importer import import_format
from gpufabric.store.core import Store

TOPO = (Path(__file__).parents[1] / "fixtures" / "ibnetdiscover" / "lab-6x2-sm.topology.txt").read_text()
NEW = "0x0002c903100001f1"  # gpu-a01's second HCA, replaced (as in test_ib_reimport)
SWAPPED = TOPO.replace("2c90310000111", "2c903100001f1")


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    db = f"sqlite:///{tmp_path}/gf.db"
    monkeypatch.setenv("GPUFABRIC_HOME", str(tmp_path))  # no fabrics.yaml: the format's defaults
    monkeypatch.setenv("GPUFABRIC_DB", db)
    close_stores()
    Local().import_format("ibnetdiscover", import_format(), TOPO, None, False)
    yield db
    close_stores()


def test_a_lease_landing_while_the_text_is_read_waits_for_the_import(url: str) -> None:
    """gpu-a01 is available when the format reads the known nodes; another replica leases it at
    that moment. The import writes what it judged (the confirmed new HCA), then the lease lands:
    before, the lease slipped in between and the write was refused (``node gpu-a01 is leased``)."""
    real = import_format()
    order: list[str] = []
    other = Store.open(url)

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
            return nodes

        return real.read(dataclasses.replace(req, known=known))

    try:
        started = time.monotonic()
        doc = Local().import_format("ibnetdiscover", ImportFormat(real.name, read), SWAPPED, None, False,
                                    (f"{NEW}=gpu-a01",))  # fmt: skip
        order.append("import")
        racer.join(30)
        assert order == ["import", "lease"], order
        assert doc["result"]["updated"] == 1 and doc["pending"] == []
        after = other.node("gpu-a01")
        assert after.state is NodeState.LEASED and NEW in {str(p.port_guid) for p in all_ib_ports(after)}
        with other.engine.connect() as conn:  # the import's audit event, committed with its write
            events = list(conn.exec_driver_sql("SELECT target, outcome FROM events WHERE action = 'inventory.import'"))
        assert [tuple(e) for e in events] == [("7 nodes", "ok")] * 2 and time.monotonic() - started < 30
    finally:
        other.close()
