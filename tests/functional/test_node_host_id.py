"""A node's identity in an outside inventory (``nodes.host_id``, migration 0019): what Neutron's
``binding:host_id`` names (Ironic's node UUID). Written with the nodes an import lists, kept by
an import that does not name it, moved to the node Ironic names now when a node was renamed
there, one node per id; read back by the API's reader (``GET /api/v1/nodes?host_id=``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.errors import ValidationError
from gpufabric.domain.models import Inventory, Node
from gpufabric.store.core import Store
from gpufabric.store.queries import Reader

A, B = "6f1c3a52-8f43-4b9e-9a63-0b5c2a9d0a01", "6f1c3a52-8f43-4b9e-9a63-0b5c2a9d0a02"


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = Store.open(store_url)
    yield s
    s.close()


def host_ids(store: Store) -> dict[str, str | None]:
    engine = create_engine(store.url)
    try:
        with engine.connect() as c:
            return {r[0]: r[1] for r in c.execute(text("SELECT name, host_id FROM nodes ORDER BY name"))}
    finally:
        engine.dispose()


def test_an_import_stores_keeps_and_moves_host_ids(store: Store) -> None:
    store.upsert_inventory(Inventory((Node("gpu-a01"), Node("gpu-a02")), (("gpu-a01", A), ("gpu-a02", B))))
    assert host_ids(store) == {"gpu-a01": A, "gpu-a02": B}
    store.upsert_inventory(Inventory((Node("gpu-a01"),)))  # an import that knows no host ids keeps them
    assert host_ids(store) == {"gpu-a01": A, "gpu-a02": B}
    # renamed in Ironic: the UUID follows the name Ironic gives it now
    store.upsert_inventory(Inventory((Node("gpu-b01"),), (("gpu-b01", A),)))
    assert host_ids(store) == {"gpu-a01": None, "gpu-a02": B, "gpu-b01": A}
    items, total = Reader(store).nodes(LOCAL_ADMIN, 10, 0, host_id=A)
    assert (total, [(n["name"], n["host_id"]) for n in items]) == (1, [("gpu-b01", A)])
    assert Reader(store).nodes(LOCAL_ADMIN, 10, 0, host_id="no-such-uuid") == ([], 0)


def test_one_node_per_host_id(store: Store) -> None:
    with pytest.raises(ValidationError, match="one node per host id"):
        store.upsert_inventory(Inventory((Node("gpu-a01"), Node("gpu-a02")), (("gpu-a01", A), ("gpu-a02", A))))
    assert host_ids(store) == {}  # nothing written
    with pytest.raises(ValidationError, match="a node of the import"):
        store.upsert_inventory(Inventory((Node("gpu-a01"),), (("gpu-a09", A),)))
    assert host_ids(store) == {}
