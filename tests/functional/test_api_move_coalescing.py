"""What the serve worker coalesces, through the API (issue 31, item 10): ``gpufabric serve``'s
own worker pass (:class:`~gpufabric.runtime.move_worker.MoveWorker`, its default window) in its
loop, woken by the requests, over in-memory Ethernet and InfiniBand fabrics holding the API
world's 33 nodes.

* 32 moves requested together (``POST /moves/batch``, one transaction) are one batch.
* 32 single ``POST /moves`` arriving while a batch runs (its SM apply held until they are all
  in) are the next batch, one of 32.

A batch is what the worker's engine runs in one ``run_batch``; the test waits for the moves'
end (it does not time anything)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gpufabric.api.app import create_app
from gpufabric.api.deps import ApiContext
from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.moves import MoveStatus
from gpufabric.engine.fabrics import Fabrics
from gpufabric.engine.moves import MoveEngine
from gpufabric.runtime.loops import Loops, MoveProgress
from gpufabric.runtime.move_worker import DEFAULT_WINDOW, MoveWorker
from gpufabric.store.core import Store
from gpufabric.store.moves import MoveLedger
from gpufabric.store.registry import Registry, parse_segments
from gpufabric.workflow.actions import Actions
from gpufabric.workflow.inventory import inventory_from_dict

from support import drivers
from support.api_world import inventory
from support.memfabric import register

NODES = 33
CFG = parse_segments()
SM_GUID = "0x0002c903ffff0001"


def fabrics_config(inv: dict[str, Any]) -> dict[str, Any]:
    """In-memory devices for every port of the world's inventory: a switch per leaf, one SM."""
    by_switch: dict[str, list[str]] = {}
    guids: list[str] = []
    for n in inv["nodes"]:
        for p in n["ethernet"]:
            by_switch.setdefault(p["switch"], []).append(p["switch_port"])
        guids += [p["port_guid"] for p in n["ib"]]
    return {
        "ethernet": [
            {"driver": "mem-switch", "options": {"switch": s, "ports": ports}} for s, ports in by_switch.items()
        ],
        "infiniband": {"driver": "mem-sm", "options": {"ports": guids}},
        "sm_port_guids": [SM_GUID],
    }


class Served:
    """The API and serve's worker pass in its loop; the batches its engine ran, in order."""

    def __init__(self, home: Path) -> None:
        inv = inventory(NODES, eth=1, ib=1, gpus=0)
        self.store = Store.open(f"sqlite:///{home}/gpufabric.db")
        act = Actions(self.store, lambda: CFG)
        act.import_inventory(LOCAL_ADMIN, inventory_from_dict(inv))
        for t in ("alpha", "beta"):
            act.create_tenant(LOCAL_ADMIN, t)
            act.create_network(LOCAL_ADMIN, f"{t}-net", t)
        self.token = act.create_token(LOCAL_ADMIN, "ops", "admin", None)[1]
        reg = Registry.from_entry_points()
        register(reg)
        self.fabrics = Fabrics.from_config(fabrics_config(inv), reg)
        self.engine = MoveEngine(self.store, self.fabrics, CFG, worker="serve:1", heartbeat_every=60)
        self.batches: list[list[str]] = []
        run_batch = self.engine.run_batch

        def recorded(moves: Any) -> Any:
            self.batches.append([m.node for m in moves])
            return run_batch(moves)

        self.engine.run_batch = recorded  # type: ignore[method-assign]
        self.loops = Loops()
        self.ctx = ApiContext(self.store, lambda: CFG, loops=self.loops)
        self.worker = MoveWorker(self.store, lambda: self.engine, MoveProgress(self.store, "serve:1"))
        assert self.worker.window == DEFAULT_WINDOW  # serve's default

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def wait_done(self, ids: list[int]) -> list[MoveStatus]:
        ledger, ended = MoveLedger(self.store), threading.Event()
        for _ in range(600):
            status = [ledger.get(i).status for i in ids]
            if all(s in (MoveStatus.DONE, MoveStatus.FAILED) for s in status):
                return status
            ended.wait(0.05)
        raise AssertionError(f"moves {ids} not ended: {status}")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Served, TestClient]]:
    s = Served(tmp_path)
    s.loops.start("worker", s.worker, 3600.0)  # a pass at start, then only when a request wakes it
    try:
        with TestClient(create_app(s.ctx)) as client:
            yield s, client
    finally:
        s.loops.shutdown()
        s.fabrics.close()
        s.store.close()


def test_32_moves_requested_together_are_one_batch(served: tuple[Served, TestClient]) -> None:
    s, client = served
    nodes = [f"gpu-{i:04d}" for i in range(1, 33)]
    r = client.post("/api/v1/moves/batch", json={"nodes": nodes, "to_tenant": "alpha"}, headers=s.headers())
    assert r.status_code == 202, r.text
    ids = [m["id"] for m in r.json()["items"]]
    assert s.wait_done(ids) == [MoveStatus.DONE] * 32
    assert s.batches == [nodes]


def test_32_single_requests_arriving_while_a_batch_runs_are_the_next_batch(served: tuple[Served, TestClient]) -> None:
    s, client = served
    sm = drivers.sm(s.fabrics)
    entered, release = threading.Event(), threading.Event()
    apply = sm.apply

    def held(*a: Any, **k: Any) -> Any:  # the first batch's first SM apply waits for the requests
        entered.set()
        assert release.wait(60)
        return apply(*a, **k)

    sm.apply = held
    first = client.post("/api/v1/moves", json={"node": "gpu-0000", "to_tenant": "beta"}, headers=s.headers())
    assert first.status_code == 202, first.text
    assert entered.wait(60)  # the worker runs gpu-0000's batch
    nodes = [f"gpu-{i:04d}" for i in range(1, 33)]
    ids = []
    for n in nodes:
        r = client.post("/api/v1/moves", json={"node": n, "to_tenant": "alpha"}, headers=s.headers())
        assert r.status_code == 202, r.text
        ids.append(r.json()["id"])
    release.set()
    assert s.wait_done([first.json()["id"], *ids]) == [MoveStatus.DONE] * 33
    assert s.batches == [["gpu-0000"], nodes]
