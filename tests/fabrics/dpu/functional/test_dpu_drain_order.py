"""Drain before quarantine, whoever converges first (issue 22): a lease of an OpenShift node that
ends (``lease end``) or expires records a release whose ``before_move`` cordons and drains the
node; until that has run, the desired state keeps the node with its tenant, so a reconcile pass
with policy ``repair`` in that window (or any other converge) leaves its DPU fabric alone. Then the
worker runs the release: cordon -> evictions -> quarantine, in that order in kmock's request log.
Repair itself still works: a genuinely drifted node with no open move is repaired.

Real OVN (OvnLab, a userspace OVS per DPU), Kubernetes through kmock with the Eviction subresource
(support/kmock_evict.py), DPU mode answered by the lab's mlxconfig/flint stand-in."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpufabric.cli.main import app
from gpufabric.engine.moves import MoveEngine
from gpufabric.engine.reconcile import Policy, reconcile_once
from gpufabric.lab.ovn import OvnLab
from gpufabric.store.core import Store
from gpufabric.store.tables import LeaseRow
from gpufabric.workflow.tenancy import LOCAL_OPERATOR, WORKER, TenantWorkflow

from support.dpu_site import dpu_site
from support.kmock_evict import EvictBox, make_pod

pytestmark = pytest.mark.root

NODES = ["gpu-b01", "gpu-b02"]


@dataclass
class World:
    home: Path
    lab: OvnLab
    box: EvictBox
    api: Any

    def cli(self, *args: str) -> str:
        r = CliRunner().invoke(app, list(args), env={"GPUFABRIC_HOME": str(self.home)})
        assert r.exit_code == 0, (r.output, r.exception)
        return r.output

    def engine(self) -> MoveEngine:
        from gpufabric.cli.common import open_engine

        os.environ["GPUFABRIC_HOME"] = str(self.home)
        try:
            e: MoveEngine = open_engine()
        finally:
            os.environ.pop("GPUFABRIC_HOME", None)
        return e

    def lsps(self, node: str) -> list[str]:
        """The node's OVN logical switch ports, read with ovn-nbctl (independently of gpufabric)."""
        out = subprocess.run(["ovn-nbctl", f"--db={self.lab.nb}", "--bare", "--columns=name", "list",
                              "Logical_Switch_Port"], capture_output=True, text=True, check=True).stdout  # fmt: skip
        return sorted(p for p in out.split() if p.startswith(node))

    def taints(self, node: str) -> list[str]:
        spec = self.api.read_node(node).spec
        return sorted(t.key for t in ((spec.taints if spec else None) or []))

    def pods(self, node: str) -> list[str]:
        return sorted(f"{p.metadata.namespace}/{p.metadata.name}" for p in self.api.list_pod_for_all_namespaces().items
                      if p.spec.node_name == node)  # fmt: skip

    def node_patches(self, node: str, since: int) -> list[int]:
        return [i for i, (m, p, _) in enumerate(self.box.log[since:]) if m == "PATCH" and p == f"/api/v1/nodes/{node}"]

    def evictions(self, since: int) -> list[int]:
        return [i for i, (m, _, s) in enumerate(self.box.log[since:]) if m == "POST" and s == "eviction"]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    home = tmp_path_factory.mktemp("gf")
    with dpu_site(home, NODES, prefix="gfd", modes=dict.fromkeys(NODES, "embedded"),
                  section={"drain": {"timeout": 5.0, "retry_every": 0.1}}) as site:  # fmt: skip
        w = World(home, site.lab, site.box, site.api)
        w.cli("inventory", "import", str(home / "inventory.yaml"))
        w.cli("tenant", "create", "acme")
        for n in NODES:
            w.cli("node", "move", n, "--to-tenant", "acme", "--offering", "openshift")
        yield w


def _lease_of(store: Store, node: str) -> int:
    (lease,) = [x for x in store.leases(active_at=datetime.now(UTC)) if x.node == node]
    assert lease.id is not None
    return lease.id


def _expire(store: Store, lease_id: int) -> None:
    """The lease's end passes (as if ``--end`` had been given at the grant); the worker has not ticked."""
    with store.tx() as tx:
        row = tx.session.get(LeaseRow, lease_id)
        assert row is not None
        now = datetime.now(UTC)  # the lease may have been granted < 1 s ago: its end must stay after its start
        row.start, row.end = now - timedelta(seconds=2), now - timedelta(seconds=1)


def _release_drains_before_quarantine(world: World, engine: MoveEngine, node: str, mark: int, pods: list[str]) -> None:
    """The worker's tick: the release runs; cordon -> evictions of ``pods`` -> quarantine, in kmock's log."""
    batch = engine.run_pending()
    assert batch is not None and [(m.node, m.status.value) for m in batch.moves] == [(node, "done")]
    assert world.pods(node) == [] and world.lsps(node) == [] and "k8s.ovn.org/dpu-host" not in world.taints(node)
    patches, evictions = world.node_patches(node, mark), world.evictions(mark)
    assert [world.box.log[mark + i][1].split("/")[-2] for i in evictions] == pods and len(patches) >= 2
    cordon, quarantine = patches[0], [i for i in patches if i > evictions[-1]]
    assert cordon < evictions[0] and quarantine, world.box.log[mark:]  # quarantine (taint off) after the drain


def test_lease_end_then_repair_before_the_worker_ticks_quarantines_nothing(world: World) -> None:
    node = "gpu-b01"
    engine = world.engine()
    store = engine.store
    assert world.lsps(node) == [f"{node}.pf0vf1"] and "k8s.ovn.org/dpu-host" in world.taints(node)
    for name in ("web-1", "web-2"):
        make_pod(world.api, "acme", name, node)
    lease_id = _lease_of(store, node)
    _, move = TenantWorkflow(store).end(LOCAL_OPERATOR, lease_id)
    assert move is not None and (move.status.value, move.phase.value) == ("pending", "quarantine")
    mark = len(world.box.log)

    res = reconcile_once(engine, Policy.REPAIR, resume_moves=False)  # the window before the worker's tick
    assert res.drift.empty and not res.repaired, res.drift.lines()
    assert world.lsps(node) == [f"{node}.pf0vf1"]  # still on acme's logical switch
    assert "k8s.ovn.org/dpu-host" in world.taints(node) and world.pods(node) == ["acme/web-1", "acme/web-2"]
    assert world.node_patches(node, mark) == [] and world.evictions(mark) == []  # nothing touched before the drain

    _release_drains_before_quarantine(world, engine, node, mark, ["web-1", "web-2"])
    assert reconcile_once(engine, Policy.REPORT).drift.empty  # converged: the move's end is the desired state
    engine.fabrics.close()


def test_expired_lease_stays_with_its_tenant_until_its_release_drains_it(world: World) -> None:
    node = "gpu-b02"
    engine = world.engine()
    store = engine.store
    make_pod(world.api, "acme", "db-0", node)
    lease_id = _lease_of(store, node)
    _expire(store, lease_id)
    mark = len(world.box.log)
    res = reconcile_once(engine, Policy.REPAIR, resume_moves=False)  # expired, no release requested yet
    assert res.drift.empty and not res.repaired, res.drift.lines()
    assert world.lsps(node) == [f"{node}.pf0vf1"] and world.node_patches(node, mark) == []
    (release,) = TenantWorkflow(store).release_expired(WORKER)  # the worker's tick requests it ...
    assert release.from_tenant == "acme"
    res = reconcile_once(engine, Policy.REPAIR, resume_moves=False)  # ... and a pass lands before it runs
    assert res.drift.empty and world.lsps(node) == [f"{node}.pf0vf1"] and world.evictions(mark) == []
    _release_drains_before_quarantine(world, engine, node, mark, ["db-0"])  # the expired lease's pods drained too
    engine.fabrics.close()


def test_repair_still_repairs_a_drifted_node_with_no_open_move(world: World) -> None:
    node = "gpu-b01"
    engine = world.engine()
    if not any(x.node == node for x in engine.store.leases(active_at=datetime.now(UTC))):
        world.cli("node", "move", node, "--to-tenant", "acme", "--offering", "openshift")  # a normal move converges
    assert world.lsps(node) == [f"{node}.pf0vf1"] and not engine.ledger.open_moves()
    subprocess.run(["ovn-nbctl", f"--db={world.lab.nb}", "lsp-del", f"{node}.pf0vf1"], check=True)  # drift
    assert world.lsps(node) == []
    res = reconcile_once(engine, Policy.REPAIR)
    assert res.repaired and not res.drift.empty
    assert world.lsps(node) == [f"{node}.pf0vf1"] and reconcile_once(engine, Policy.REPORT).drift.empty
    engine.fabrics.close()


def test_a_move_onto_an_expired_unreleased_node_drains_the_old_tenant_first(world: World) -> None:
    """The lease expired, the worker has not released it yet, and the node is handed to another
    tenant: the move leaves the old tenant (drained first), not quarantine."""
    node = "gpu-b02"
    engine = world.engine()
    store = engine.store
    if not any(x.node == node for x in store.leases(active_at=datetime.now(UTC))):
        world.cli("node", "move", node, "--to-tenant", "acme", "--offering", "openshift")
    world.cli("tenant", "create", "beta")
    make_pod(world.api, "acme", "job-0", node)
    _expire(store, _lease_of(store, node))
    m = TenantWorkflow(store).move(LOCAL_OPERATOR, node, "beta", offering="openshift")
    assert m.from_tenant == "acme"
    mark = len(world.box.log)
    res = reconcile_once(engine, Policy.REPAIR, resume_moves=False)
    assert res.drift.empty and world.lsps(node) == [f"{node}.pf0vf1"] and world.node_patches(node, mark) == []
    batch = engine.run_pending()
    assert batch is not None and [x.status.value for x in batch.moves] == ["done"]
    evictions, patches = world.evictions(mark), world.node_patches(node, mark)
    assert [world.box.log[mark + i][1].split("/")[-2] for i in evictions] == ["job-0"] and patches[0] < evictions[0]
    assert world.pods(node) == [] and world.lsps(node) == [f"{node}.pf0vf1"]
    ls = subprocess.run(["ovn-nbctl", f"--db={world.lab.nb}", "lsp-get-ls", f"{node}.pf0vf1"], capture_output=True,
                        text=True, check=True).stdout  # fmt: skip
    assert "(gf-beta)" in ls, ls  # now on beta's logical switch
    labels = world.api.read_node(node).metadata.labels or {}
    assert labels.get("gpufabric.io/tenant") == "beta" and not world.api.read_node(node).spec.unschedulable
    engine.fabrics.close()
