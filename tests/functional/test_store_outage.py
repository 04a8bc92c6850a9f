"""The store unreachable mid-phase (issue 18, finding 9), on a real PostgreSQL: the session's
private cluster is made unreachable for its test database — its unix socket renamed away and the
database's backends terminated (the fabric lock's connection with them) — from a hook inside a
phase, and given back a moment later. The batch must not stay "running" until the 120 s stale
timeout: it is requeued and resumed as soon as the store answers. The delay between the store
answering again and the move being done is measured and printed."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conftest import PG_PORT, PgCluster
from gpufabric.domain.models import QUARANTINE
from gpufabric.domain.moves import MovePhase, MoveRequest, MoveStatus
from gpufabric.engine.fabrics import Fabrics
from gpufabric.engine.moves import MoveEngine
from gpufabric.store.core import Store
from gpufabric.store.queries import Reader
from gpufabric.store.registry import Registry

from support.memfabric import register
from unit.test_engine_memory import CFG, fabrics_config, inventory, mem, owners

pytestmark = pytest.mark.postgres


class Outage:
    """Cut the store of database ``db`` off (new connections refused, open ones terminated) and
    give it back after ``seconds`` (from a timer thread); ``back_at`` is when it answers again."""

    def __init__(self, cluster: PgCluster, db: str) -> None:
        self.cluster, self.db = cluster, db
        self.sock = cluster.socket_dir / f".s.PGSQL.{PG_PORT}"
        self.away = self.sock.with_name(self.sock.name + ".away")
        self.back_at: float | None = None
        self.cut_at: float | None = None

    def cut(self, seconds: float) -> None:
        with self.cluster.admin() as c:  # connected before the socket goes away
            os.rename(self.sock, self.away)
            c.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (self.db,))
        self.cut_at = time.monotonic()
        threading.Timer(seconds, self.restore).start()

    def restore(self) -> None:
        if self.away.exists():
            os.rename(self.away, self.sock)
            self.back_at = time.monotonic()


@pytest.fixture
def pg(postgres_cluster: PgCluster) -> Iterator[tuple[MoveEngine, Outage]]:
    name = f"outage{os.getpid()}_{time.monotonic_ns() % 10**9}"
    with postgres_cluster.admin() as c:
        c.execute(f'CREATE DATABASE "{name}"')
    reg = Registry.from_entry_points()
    register(reg)
    fabrics = Fabrics.from_config(fabrics_config(), reg)
    store = Store.open(url=postgres_cluster.url(name))
    store.upsert_inventory(inventory())
    for t in ("ta", "tb"):
        store.create_tenant(t)
        store.create_network(f"{t}-net", t, CFG, kinds=fabrics.kind_list())
    eng = MoveEngine(store, fabrics, CFG, worker="outage:1", heartbeat_every=0.2)
    eng.store_wait = 20  # set after construction: the same test runs on aa4b99f (and fails)
    outage = Outage(postgres_cluster, name)
    yield eng, outage
    outage.restore()
    fabrics.close()
    store.close()
    with postgres_cluster.admin() as c:
        c.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _at_join(fn: Callable[[], None]) -> Callable[[Any], bool]:
    """An apply hook of the memory fabric: runs ``fn`` at the first apply that joins a port to a
    tenant (the join phase) and never injects a fault."""
    done: list[bool] = []

    def hook(plan: Any) -> bool:
        if not done and any(c.after != QUARANTINE for c in plan.changes):
            done.append(True)
            fn()
        return False

    return hook


@pytest.mark.parametrize("where", ["join-apply", "swap"])
def test_a_store_outage_mid_phase_resumes_the_batch_as_soon_as_the_store_answers(
    pg: tuple[MoveEngine, Outage], where: str
) -> None:
    engine, outage = pg
    m = engine.ledger.request("n1", MoveRequest("ta", networks=("ta-net",)))
    other = engine.ledger.request("n2", MoveRequest("tb", networks=("tb-net",)))
    if where == "join-apply":  # mid-apply: the fabric lock's connection dies with the store (LockLostError)
        mem(engine).faults.arm(RuntimeError("never raised"),  # type: ignore[arg-type]
                               when=_at_join(lambda: outage.cut(2.0)))  # fmt: skip
    else:  # the swap's transaction cannot even start (OperationalError)
        swap = engine.ledger.swap_leases

        def cut_then_swap(*a: Any, **kw: Any) -> Any:
            if outage.cut_at is None:
                outage.cut(2.0)
            return swap(*a, **kw)

        engine.ledger.swap_leases = cut_then_swap  # type: ignore[method-assign]
    t0 = time.monotonic()
    batch = engine.run_pending()
    done_at = time.monotonic()
    assert outage.cut_at is not None and outage.back_at is not None
    assert batch is not None and {x.id: x.status for x in batch.moves} == {
        m.id: MoveStatus.DONE, other.id: MoveStatus.DONE}  # fmt: skip
    delay = done_at - outage.back_at
    print(f"\n{where}: store away {outage.back_at - outage.cut_at:.2f}s; done {delay:.2f}s after it answered"
          f" (run {done_at - t0:.2f}s; stale timeout 120s)")  # fmt: skip
    assert delay < 3.0
    got = engine.ledger.get(m.id or 0)
    assert (got.status, got.phase, got.attempts) == (MoveStatus.DONE, MovePhase.DONE, 2)
    requeued = [e["message"] for e in Reader(engine.store).move_events(m.id or 0) if "requeued" in e["message"]]
    phase = "join" if where == "join-apply" else "quarantine"
    assert len(requeued) == 1 and requeued[0].startswith(f"requeued at {phase}: ")
    assert owners(engine) == {"n1": {"ta"}, "n2": {"tb"}, "n3": {QUARANTINE}}  # read from the fabrics


def test_a_longer_outage_leaves_the_batch_to_the_next_pass_which_resumes_it_first(
    pg: tuple[MoveEngine, Outage],
) -> None:
    engine, outage = pg
    engine.store_wait = 0.5
    m = engine.ledger.request("n3", MoveRequest("ta", networks=("ta-net",)))
    mem(engine).faults.arm(RuntimeError("never raised"), when=_at_join(lambda: outage.cut(2.0)))  # type: ignore[arg-type]
    with pytest.raises(Exception, match="fabric lock lost"):
        engine.run_pending()  # gave up waiting: nothing can be recorded while the store is away
    while outage.back_at is None:
        time.sleep(0.05)
    batch = engine.run_pending()  # the worker's next pass: the dropped batch is requeued, claimed, run
    assert batch is not None and [(x.id, x.status) for x in batch.moves] == [(m.id, MoveStatus.DONE)]
    assert owners(engine)["n3"] == {"ta"}


def test_the_outage_hook_really_cuts_the_store(pg: tuple[MoveEngine, Outage]) -> None:
    engine, outage = pg
    outage.cut(1.0)
    assert not engine.ledger.reachable()
    while outage.back_at is None:
        time.sleep(0.05)
    assert engine.ledger.reachable()
