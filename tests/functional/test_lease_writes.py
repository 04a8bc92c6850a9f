"""The API's plain-SQL lease write keeps the store's lease rules, on SQLite and PostgreSQL:
unknown tenant/node/offering/network, another tenant's network, overlaps; its event is
written in the same transaction, and nothing is written when it is refused."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.errors import ConflictError, NotFoundError
from gpufabric.domain.models import Lease
from gpufabric.domain.segments import SegmentConfig
from gpufabric.service import lease_writes
from gpufabric.service.actions import Actions
from gpufabric.service.inventory import inventory_from_dict
from gpufabric.service.queries import Reader
from gpufabric.service.store import Store

from support.api_world import inventory

T0 = datetime(2031, 1, 1, tzinfo=UTC)
H = timedelta(hours=1)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = Store.open(store_url)
    act = Actions(s, SegmentConfig.default)
    act.import_inventory(LOCAL_ADMIN, inventory_from_dict(inventory(3, ib=1, gpus=0)))
    for t in ("alpha", "beta"):
        act.create_tenant(LOCAL_ADMIN, t)
        act.create_network(LOCAL_ADMIN, "net", t)
    yield s
    s.close()


@pytest.mark.parametrize(
    ("lease", "error", "match"),
    [
        (Lease("nobody", "gpu-0000", T0), NotFoundError, "tenant not found: nobody"),
        (Lease("alpha", "gpu-9999", T0), NotFoundError, "node not found: gpu-9999"),
        (Lease("alpha", "gpu-0000", T0, offering="gold"), NotFoundError, "offering not found: gold"),
        (Lease("alpha", "gpu-0000", T0, networks=("other",)), NotFoundError, "network not found: alpha/other"),
    ],
    ids=["tenant", "node", "offering", "network"],
)
def test_refusals_write_nothing(store: Store, lease: Lease, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        lease_writes.create_lease(store, lease, LOCAL_ADMIN)
    assert store.leases() == []


def test_overlaps_and_the_event_in_the_same_transaction(store: Store) -> None:
    first = lease_writes.create_lease(store, Lease("alpha", "gpu-0000", T0, T0 + H, ("net",)), LOCAL_ADMIN)
    assert store.lease(first.id or 0).networks == ("net",)
    assert store.lease(first.id or 0).end == T0 + H
    with pytest.raises(ConflictError, match=f"node gpu-0000 already has lease {first.id} \\(tenant alpha"):
        lease_writes.create_lease(store, Lease("beta", "gpu-0000", T0 + H / 2, None, ("net",)), LOCAL_ADMIN)
    after = lease_writes.create_lease(store, Lease("beta", "gpu-0000", T0 + H, None, ("net",)), LOCAL_ADMIN)
    assert store.lease(after.id or 0).tenant == "beta"  # back to back is fine; beta's own "net"
    with pytest.raises(ConflictError, match="open end"):
        lease_writes.create_lease(store, Lease("alpha", "gpu-0000", T0 + 5 * H, T0 + 6 * H), LOCAL_ADMIN)
    events, _ = Reader(store).events(LOCAL_ADMIN, 10, 0, "lease.create")
    assert [(e["target"], e["tenant"], e["outcome"]) for e in events] == [("gpu-0000", "beta", "ok"),
                                                                          ("gpu-0000", "alpha", "ok")]
