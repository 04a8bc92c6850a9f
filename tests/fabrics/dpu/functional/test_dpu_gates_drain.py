"""The openshift offering's DPU gates and node lifecycle, end to end through the CLI and the move
engine: real OVN (OvnLab, a userspace OVS per DPU), Kubernetes through kmock with a scripted
Eviction subresource (kmock cannot enforce PodDisruptionBudgets: the 429s are scripted, see
support/kmock_evict.py), and DPU mode/firmware answered by the lab's mlxconfig/flint stand-in.

* a move into openshift is refused (one line, exit 2, the move cancelled, nothing changed) for a
  DPU in separated-host mode and for one with a power cycle pending; ``node power-cycled``
  refuses until the power cycle happened; then the move proceeds (labels, taint, uncordoned);
* a node with pods moved out of openshift: cordoned, pods evicted (DaemonSet pods left, 429s
  retried), then quarantined — in that order in kmock's request log;
* a drain refused past its timeout leaves the node in its tenant, uncordoned, with every piece
  of the DPU fabric unchanged (read independently: ovs-vsctl, ovn-nbctl, the Kubernetes API)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpufabric.cli.main import app
from gpufabric.domain.errors import GpufabricError
from gpufabric.fabrics.dpu.plan.profiles import port_mac, port_name
from gpufabric.lab.ovn import OvnLab

from support.dpu_site import STUB, dpu_site
from support.kmock_evict import EvictBox, make_pod

pytestmark = pytest.mark.root

NODES = ["gpu-a01", "gpu-a02"]


@dataclass
class World:
    home: Path
    lab: OvnLab
    box: EvictBox
    api: Any

    def cli(self, *args: str) -> tuple[int, str]:
        """(exit code, output); a GpufabricError is what `gpufabric` prints as one line, exit 2."""
        r = CliRunner().invoke(app, list(args), env={"GPUFABRIC_HOME": str(self.home)})
        if isinstance(r.exception, GpufabricError):
            assert "\n" not in r.exception.message
            return 2, r.output + r.exception.message
        return r.exit_code, r.output

    def stub(self, node: str, *args: str) -> None:
        subprocess.run([*STUB, str(self.home / "mst" / f"{node}.json"), *args], check=True, capture_output=True)

    def sample(self, node: str) -> dict[str, Any]:
        """The DPU fabric's state of ``node``, read independently of gpufabric."""
        ovs = subprocess.run(["ovs-vsctl", f"--db={self.lab.ovsdb(node)}", "get", "Open_vSwitch", ".", "external_ids",
                              "other_config"], capture_output=True, text=True, check=True).stdout  # fmt: skip
        lsps = subprocess.run(["ovn-nbctl", f"--db={self.lab.nb}", "--bare", "--columns=name", "list",
                               "Logical_Switch_Port"], capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
        k = self.api.read_node(node)
        return {"ovs": ovs, "lsps": sorted(p for p in lsps if p.startswith(node)),
                "labels": dict(k.metadata.labels or {}),
                "taints": sorted((t.key, t.effect) for t in ((k.spec.taints if k.spec else None) or []))}  # fmt: skip

    def owner(self, node: str) -> str:
        code, out = self.cli("node", "show", node, "--json")
        assert code == 0, out
        n = json.loads(out)
        assert n["state"] in ("available", "leased"), n  # never left "moving" by a refused move
        return str(n["tenant"])

    def cordoned(self, node: str) -> bool:
        spec = self.api.read_node(node).spec
        return bool(spec is not None and spec.unschedulable)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    home = tmp_path_factory.mktemp("gf")
    with dpu_site(home, NODES, prefix="gfg", modes=dict.fromkeys(NODES, "separated"),
                  section={"drain": {"timeout": 1.5, "retry_every": 0.1},
                           "capacity": {"BlueField-2": {"entries": 64, "source": "stated by the operator (test)"}}},
                  dpu={"nic_model": "BlueField-2"}) as site:  # fmt: skip
        w = World(home, site.lab, site.box, site.api)
        for args in (("inventory", "import", str(home / "inventory.yaml")), ("tenant", "create", "acme")):
            code, out = w.cli(*args)
            assert code == 0, out
        yield w


def test_gate_refuses_separated_and_pending_then_power_cycled_proceeds(world: World) -> None:
    before = world.sample("gpu-a02")
    code, out = world.cli("node", "move", "gpu-a02", "--to-tenant", "acme", "--offering", "openshift")
    assert code == 2, out
    assert "gpu-a02: DPU is in separated mode; offering openshift needs embedded or restricted (dpu) mode" in out
    assert world.owner("gpu-a02") == "quarantine" and world.sample("gpu-a02") == before
    code, out = world.cli("move", "list", "--json")
    assert code == 0 and [m["status"] for m in json.loads(out) if m["node"] == "gpu-a02"] == ["cancelled"]

    # the operator switches gpu-a01 to DPU mode: pending until a power cycle
    world.stub("gpu-a01", "mlxconfig", "-d", "/dev/mst/mt41686_pciconf0", "-y", "set", "INTERNAL_CPU_MODEL=1")
    code, out = world.cli("offload", "facts", "gpu-a01", "--json")
    f = json.loads(out)["dpus"][0]
    assert (f["mode"], f["next_mode"], f["power_cycle_pending"], f["firmware"]) == ("separated", "embedded", True,
                                                                                   "24.35.1012")
    code, out = world.cli("node", "move", "gpu-a01", "--to-tenant", "acme", "--offering", "openshift")
    assert code == 2 and "gpu-a01: DPU power cycle pending (INTERNAL_CPU_MODEL SEPARATED_HOST(0) -> EMBEDDED_CPU(1))" in out
    assert world.owner("gpu-a01") == "quarantine"
    code, out = world.cli("node", "power-cycled", "gpu-a01")
    assert code == 2 and "still reports a pending change" in out
    world.stub("gpu-a01", "power-cycle")  # the lab's BMC
    code, out = world.cli("node", "power-cycled", "gpu-a01")
    assert code == 0 and "embedded mode" in out, out
    code, out = world.cli("node", "move", "gpu-a01", "--to-tenant", "acme", "--offering", "openshift")
    assert code == 0, out
    assert world.owner("gpu-a01") == "acme"
    s = world.sample("gpu-a01")
    assert s["labels"]["gpufabric.io/tenant"] == "acme" and s["labels"]["gpufabric.io/offering"] == "openshift"
    assert ("k8s.ovn.org/dpu-host", "NoSchedule") in s["taints"] and s["lsps"] == ["gpu-a01.pf0vf1"]
    assert not world.cordoned("gpu-a01")


def test_burned_firmware_not_yet_running_is_a_pending_power_cycle(world: World) -> None:
    """Issue 31 item 3: a new firmware burned on gpu-a02's DPU (the stand-in's ``burn``, flint then
    prints ``FW Version(Running)``) runs only after a power cycle: ``offload facts`` reports the
    running firmware, the flashed one and a power cycle pending; the openshift gate refuses;
    ``node power-cycled`` refuses until the power cycle happened."""
    world.stub("gpu-a02", "mlxconfig", "-d", "/dev/mst/mt41686_pciconf0", "-y", "set", "INTERNAL_CPU_MODEL=1")
    world.stub("gpu-a02", "power-cycle")
    world.stub("gpu-a02", "burn", "24.40.1000")
    code, out = world.cli("offload", "facts", "gpu-a02", "--json")
    assert code == 0, out
    f = json.loads(out)["dpus"][0]
    assert (f["mode"], f["firmware"], f["flashed_firmware"], f["power_cycle_pending"]) == ("embedded", "24.35.1012",
                                                                                           "24.40.1000", True)
    assert f["pending"] == [{"key": "firmware", "current": "24.35.1012", "next_boot": "24.40.1000"}]
    code, out = world.cli("offload", "facts", "gpu-a02")
    assert code == 0 and "(flashed" in out and "24.40.1000" in out and "pending" in out, out  # the cell wraps
    code, out = world.cli("node", "move", "gpu-a02", "--to-tenant", "acme", "--offering", "openshift")
    assert code == 2 and "gpu-a02: DPU power cycle pending (firmware 24.35.1012 -> 24.40.1000)" in out, out
    assert world.owner("gpu-a02") == "quarantine"
    code, out = world.cli("node", "power-cycled", "gpu-a02")
    assert code == 2 and "still reports a pending change (firmware 24.35.1012 -> 24.40.1000)" in out, out
    world.stub("gpu-a02", "power-cycle")
    code, out = world.cli("node", "power-cycled", "gpu-a02")
    assert code == 0 and "firmware 24.40.1000, no change pending" in out, out


def _dump_flows(world: World, node: str) -> int:
    out = subprocess.run(["ovs-appctl", "-t", world.lab.appctl_target(node), "dpctl/dump-flows", "-m"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return sum(1 for line in out.splitlines() if line.strip() and not line.startswith("flow-dump"))


def test_offload_report_reads_the_configured_dpus_by_default(world: World) -> None:
    """No flag: fabrics.yaml's DPUs (real OVN, userspace datapath: every flow dp:ovs), agreeing
    with ovs-appctl dpctl/dump-flows read here; the same report at /api/v1/offload."""
    assert world.owner("gpu-a01") == "acme"
    world.lab.add_pod("gpu-a01", "pf0vf1", port_name("gpu-a01", "pf0vf1"), port_mac("gpu-a01", "pf0vf1"), "10.97.0.1/24")
    pod = world.lab.status()["pods"]["gpu-a01/pf0vf1"]
    subprocess.run(["ip", "netns", "exec", pod, "ping", "-c", "2", "-i", "0.2", "-W", "1", "10.97.0.9"], capture_output=True)
    before = _dump_flows(world, "gpu-a01")
    code, out = world.cli("offload", "report", "--json")
    assert code == 0, out
    after = _dump_flows(world, "gpu-a01")  # flows may expire (idle) between two reads: bracket the report
    rep = json.loads(out)
    rows = {(r["node"], r["tenant"]): r for r in rep["rows"]}
    assert min(before, after) > 0 and {t["node"] for t in rep["tables"]} == set(NODES)
    a01 = [r for (n, _), r in rows.items() if n == "gpu-a01"]
    assert min(before, after) <= sum(r["datapath_flows"] for r in a01) <= max(before, after)
    assert sum(r["hw_flows"] + r["tc_flows"] for r in rep["rows"]) == 0  # userspace datapath: nothing offloaded
    assert ("gpu-a01", "acme") in rows
    # the capacity is the one fabrics.yaml states, with its source (nothing built in)
    assert {(t["capacity"], t["capacity_source"]) for t in rep["tables"]} == {(64, "stated by the operator (test)")}

    # the same report's series in /metrics (serve adds every fabric's own series, cached)
    from gpufabric.cli.common import open_engine as _open
    from gpufabric.runtime.telemetry import fabric_metrics

    os.environ["GPUFABRIC_HOME"] = str(world.home)
    try:
        e = _open()
        text = fabric_metrics(e)
        flows = e.fabrics.backends["dpu"].observe().flows  # what the audit's flow-leftover check reads
        e.fabrics.close()
    finally:
        os.environ.pop("GPUFABRIC_HOME", None)
    series = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    acme = int(series['gpufabric_dpu_offload_flows{node="gpu-a01",tenant="acme",path="datapath"}'])
    assert ("gpu-a01", "acme") in flows
    assert acme >= 1 and series['gpufabric_dpu_offload_table_capacity{node="gpu-a01",nic_model="BlueField-2"}'] == "64"

    from fastapi.testclient import TestClient

    from gpufabric.api.app import create_app
    from gpufabric.api.deps import ApiContext
    from gpufabric.cli.common import open_engine, segment_config
    from gpufabric.domain.auth import LOCAL_ADMIN
    from gpufabric.store.core import Store

    os.environ["GPUFABRIC_HOME"] = str(world.home)
    try:
        engine = open_engine()
        store = Store.open(home=world.home)
        ctx = ApiContext(store, segment_config, engine=lambda: engine)
        token = ctx.actions.create_token(LOCAL_ADMIN, "ops", "admin", None)[1]
        lessee = ctx.actions.create_token(LOCAL_ADMIN, "u", "lessee", "acme")[1]
        http = TestClient(create_app(ctx))
        r = http.get("/api/v1/offload", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
        assert {t["node"] for t in r.json()["tables"]} == set(NODES)
        assert ("gpu-a01", "acme") in {(x["node"], x["tenant"]) for x in r.json()["rows"]}
        assert http.get("/api/v1/offload", headers={"Authorization": f"Bearer {lessee}"}).status_code == 403
    finally:
        os.environ.pop("GPUFABRIC_HOME", None)


def test_drain_refused_past_timeout_changes_nothing(world: World) -> None:
    assert world.owner("gpu-a01") == "acme"
    make_pod(world.api, "acme", "db-0", "gpu-a01")
    world.box.refuse["acme/db-0"] = -1  # a PodDisruptionBudget that never allows it
    before = world.sample("gpu-a01")
    t0 = time.monotonic()
    code, out = world.cli("node", "move", "gpu-a01", "--to-tenant", "quarantine")
    assert code == 2 and "drain of gpu-a01 did not finish in 1.5s" in out and "acme/db-0" in out, out
    assert time.monotonic() - t0 >= 1.5
    assert world.owner("gpu-a01") == "acme"
    assert world.sample("gpu-a01") == before and not world.cordoned("gpu-a01")
    world.box.refuse.pop("acme/db-0")
    world.api.delete_namespaced_pod("db-0", "acme")


def test_leaving_openshift_cordons_evicts_then_quarantines(world: World) -> None:
    assert world.owner("gpu-a01") == "acme"
    for name in ("web-1", "web-2"):
        make_pod(world.api, "acme", name, "gpu-a01")
    make_pod(world.api, "kube-system", "dns-a01", "gpu-a01", daemonset=True)
    make_pod(world.api, "acme", "web-9", "gpu-a02")
    world.box.refuse["acme/web-2"] = 2  # PDB refuses twice, then allows
    mark = len(world.box.log)
    code, out = world.cli("node", "move", "gpu-a01", "--to-tenant", "quarantine")
    assert code == 0, out
    pods = sorted(f"{p.metadata.namespace}/{p.metadata.name}" for p in world.api.list_pod_for_all_namespaces().items)
    assert pods == ["acme/web-9", "kube-system/dns-a01"]
    log = world.box.log[mark:]
    cordon = next(i for i, (m, p, _) in enumerate(log) if m == "PATCH" and p == "/api/v1/nodes/gpu-a01")
    evictions = [i for i, (m, _, s) in enumerate(log) if m == "POST" and s == "eviction"]
    assert [log[i][1].split("/")[-2] for i in evictions] == ["web-1", "web-2", "web-2", "web-2"]
    later_patches = [i for i, (m, p, _) in enumerate(log) if m == "PATCH" and p == "/api/v1/nodes/gpu-a01" and i > cordon]
    assert cordon < evictions[0] and later_patches and min(later_patches) > evictions[-1]  # quarantine after the drain
    s = world.sample("gpu-a01")
    assert world.owner("gpu-a01") == "quarantine" and s["lsps"] == [] and "gpufabric.io/tenant" not in s["labels"]
    assert ("k8s.ovn.org/dpu-host", "NoSchedule") not in s["taints"] and world.cordoned("gpu-a01")
