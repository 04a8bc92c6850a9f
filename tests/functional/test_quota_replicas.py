"""Quotas hold across replicas (issue 31, item 12): two writers into one tenant, each with its own
store connection pool as two ``serve`` replicas on one PostgreSQL have, cannot both take its last
network or lease. The interleaving is forced, not timed: writer A counts and then holds its
transaction open until writer B has counted too (the race: both see room) or B is waiting for a
lock of A's (its count waits for A's commit); then A writes. Exactly one of the two is refused,
and the tenant ends at its quota, not over it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpufabric.domain.auth import Principal, Role
from gpufabric.domain.errors import QuotaError
from gpufabric.domain.quotas import Quotas
from gpufabric.store.core import Store
from gpufabric.store.registry import parse_segments
from gpufabric.workflow import quotas
from gpufabric.workflow.actions import Actions

from support.api_world import build_world

pytestmark = pytest.mark.postgres
SERVICE = Principal("neutron", Role.SERVICE)  # counted against quotas (an admin is not)


@pytest.fixture
def pg(store_url: str, tmp_path: Path) -> str:
    build_world(tmp_path, nodes=6, leased=2, url=store_url).store.close()  # beta: 2 networks, 1 lease (gpu-0001)
    return store_url


def _until(what: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60  # only ends a broken run: nothing is asserted on time
    while not what():
        assert time.monotonic() < deadline, "writer B neither counted nor waited for writer A"
        time.sleep(0.01)


NODE = {"A": "gpu-0002", "B": "gpu-0003"}
WRITES: dict[str, tuple[Quotas, Callable[[Actions, str], Any]]] = {
    "networks": (Quotas(networks=3), lambda a, who: a.create_network(SERVICE, f"net-{who.lower()}", "beta")),
    "leases": (Quotas(leases=2), lambda a, who: a.create_lease(SERVICE, "beta", NODE[who], ("beta-net",))),
}


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)  # two replicas' pools on one PostgreSQL
@pytest.mark.parametrize("what", sorted(WRITES))
def test_two_replicas_cannot_both_take_a_tenants_last_unit_of_quota(
    pg: str, postgres_cluster: Any, monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    quota, write = WRITES[what]
    a_counted, b_counted = threading.Event(), threading.Event()
    real = quotas.usage

    def b_waits_for_a_lock() -> bool:
        with postgres_cluster.admin() as c:
            row = c.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'gf-b' "
                            "AND wait_event_type = 'Lock'").fetchone()  # fmt: skip
        return bool(row and row[0])

    def counted(tx: Any, tenant: str, name: str) -> int:
        n: int = real(tx, tenant, name)
        me = threading.current_thread().name
        if me == "A" and not a_counted.is_set():
            a_counted.set()
            _until(lambda: b_counted.is_set() or b_waits_for_a_lock())  # A's transaction stays open meanwhile
        elif me == "B":
            b_counted.set()
        return n

    monkeypatch.setattr(quotas, "usage", counted)
    stores = {who: Store.open(f"{pg}&application_name=gf-{who.lower()}") for who in "AB"}  # two replicas' pools
    results: dict[str, Any] = {}

    def run(who: str) -> None:
        cfg = parse_segments()
        try:
            results[who] = write(Actions(stores[who], lambda: cfg, quota=lambda: quota), who)
        except Exception as e:  # the outcome is asserted below
            results[who] = e

    a = threading.Thread(target=run, args=("A",), name="A")
    b = threading.Thread(target=run, args=("B",), name="B")
    try:
        a.start()
        assert a_counted.wait(60)
        b.start()
        a.join(120)
        b.join(120)
        refused = [who for who, r in results.items() if isinstance(r, QuotaError)]
        assert refused == ["B"] and not isinstance(results["A"], Exception), results
        assert results["B"].to_json()["error"]["field"] == f"quotas.{what}"
        with Store.open(pg) as s, s.tx() as tx:
            assert real(tx, "beta", what) == quota.limit(what)  # at its quota, not over it
    finally:
        for s in stores.values():
            s.close()
