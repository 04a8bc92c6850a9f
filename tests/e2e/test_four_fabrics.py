"""Moves over all four fabrics of the lab, read back independently of gpufabric's drivers:
Ethernet (ovs-vsctl), InfiniBand (SMP), NVLink (the stand-in Fabric Manager's ``fmpm -l``), DPU
(OVN NB, the DPU's OVS over OVSDB, Node labels/taints through the official Kubernetes client
against the kmock stand-in, pings between tenant pods through OVN). Plus: a lease's end
releases the node within the worker's tick with no reconcile by hand, and ``lab up`` after
``lab down`` puts the leases back."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpufabric.lab.extras import pod_ping
from gpufabric.lab.kube import KubeStandin
from gpufabric.lab.lab import Lab
from gpufabric.lab.serve import serving

from e2e.conftest import LabEnv
from e2e.test_move import nets_of

pytestmark = [pytest.mark.root, pytest.mark.timeout(600)]
LAB_NODES = 4
LAB_DPUS = 2


def dpu_ovs(lab: LabEnv, node: str) -> dict[str, str]:
    db = f"unix:{lab.home / 'lab' / 'ovn' / 'dpu' / node / 'db.sock'}"
    out = subprocess.run(["ovs-vsctl", f"--db={db}", "--format=json", "--columns=other_config,external_ids", "list",
                          "Open_vSwitch"], capture_output=True, text=True, check=True).stdout  # fmt: skip
    row = json.loads(out)["data"][0]
    return {k: v for col in row for k, v in col[1]}


def k8s_node(lab: LabEnv, name: str) -> Any:
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = KubeStandin(lab.home / "lab" / "kube").url_file.read_text().strip()
    return client.CoreV1Api(client.ApiClient(cfg)).read_node(name)


def ping(lab: LabEnv, src: str, dst_index: int, tries: int = 4) -> bool:
    lab_obj = Lab(lab.home)
    return any(pod_ping(lab_obj.dir, lab_obj.prefix, src, dst_index) or time.sleep(0.3) for _ in range(tries))


def test_openshift_move_sets_every_fabric_and_moving_out_removes_it(lab: LabEnv) -> None:
    lab.gfj("node", "move", "gpu-a01", "--to-tenant", "alpha", "--offering", "openshift")
    lab.gfj("node", "move", "gpu-a02", "--to-tenant", "alpha", "--offering", "openshift", "--gpus", "4")
    assert lab.nvlink_active("gpu-a01") == {0}
    assert len(lab.nvlink_active("gpu-a02")) == 1 and lab.nvlink_active("gpu-a02") <= {1, 2}
    ovs = dpu_ovs(lab, "gpu-a01")
    assert ovs.get("hw-offload") == "true" and ovs.get("host-k8s-nodename") == "gpu-a01"
    assert ovs.get("gpufabric-tenant") == "alpha"
    host = k8s_node(lab, "gpu-a01")
    assert "k8s.ovn.org/dpu-host" in (host.metadata.labels or {})
    assert any(t.key == "k8s.ovn.org/dpu-host" and t.effect == "NoSchedule" for t in host.spec.taints or [])
    assert "k8s.ovn.org/dpu" in (k8s_node(lab, "gpu-a01-bf3").metadata.labels or {})
    assert lab.dpu_tenant_switches("gpu-a01") == {"gf-alpha"} == lab.dpu_tenant_switches("gpu-a02")
    assert ping(lab, "gpu-a01", 1), "two pods of alpha on two DPUs reach each other through OVN"

    moved = lab.gfj("node", "move", "gpu-a02", "--to-tenant", "beta", "--offering", "openshift")
    quarantine, join = moved["plans"]["quarantine"]["nvlink"], moved["plans"]["join"]["nvlink"]
    assert [c["action"] for c in quarantine] == ["deactivate"] and [c["action"] for c in join] == ["activate"]
    assert lab.nvlink_active("gpu-a02") == {0}
    assert lab.dpu_tenant_switches("gpu-a02") == {"gf-beta"}
    assert not ping(lab, "gpu-a01", 1, tries=2), "alpha's pod must not reach beta's"

    lab.gfj("node", "move", "gpu-a01", "--to-tenant", "quarantine")
    assert lab.nvlink_active("gpu-a01") == set() and lab.dpu_tenant_switches("gpu-a01") == set()
    ovs = dpu_ovs(lab, "gpu-a01")
    assert "gpufabric-tenant" not in ovs and "host-k8s-nodename" not in ovs
    host = k8s_node(lab, "gpu-a01")
    assert "k8s.ovn.org/dpu-host" not in (host.metadata.labels or {})
    assert not any(t.key == "k8s.ovn.org/dpu-host" for t in host.spec.taints or [])
    code = lab.gf("audit", "--json", check=False)
    assert code.returncode == 0, code.stdout


def test_audit_reports_a_partition_activated_by_hand_across_two_tenants(lab: LabEnv) -> None:
    lab.gfj("node", "move", "gpu-a03", "--to-tenant", "alpha", "--gpus", "4")
    active = lab.nvlink_active("gpu-a03")
    fm = lab.home / "lab" / "nvlink" / "gpu-a03.fm"
    fmpm = [sys.executable, "-m", "gpufabric.lab.fmpm_standin", "--unix-domain-socket", str(fm)]
    other = 2 if active == {1} else 1  # the other half of the baseboard, leased to nobody
    subprocess.run([*fmpm, "-a", str(other)], capture_output=True, check=True)
    report = json.loads(lab.gf("audit", "--json", check=False).stdout)
    found = {(v["invariant"], v["node"]) for v in report["violations"]}
    assert ("NVLINK-FOREIGN", "gpu-a03") in found or ("NVLINK-PARTITION-SHARED", "gpu-a03") in found, found
    subprocess.run([*fmpm, "-d", str(other)], capture_output=True, check=True)
    lab.gfj("node", "move", "gpu-a03", "--to-tenant", "quarantine")


def _serve_story(lab: LabEnv, log: Path, node: str) -> str:
    """What a failed wait shows: serve's output and the node's moves with their events."""
    moves = json.loads(lab.gf("move", "list", "--json", check=False).stdout or "[]")
    mine = [m for m in moves if m.get("node") == node]
    shown = [lab.gf("move", "show", str(m["id"]), "--json", check=False).stdout for m in mine[-3:]]
    return f"serve's output:\n{log.read_text()[-4000:]}\nmoves of {node}:\n" + "\n".join(shown)


def test_an_ended_lease_leaves_its_tenant_within_the_worker_tick(lab: LabEnv) -> None:
    nets = nets_of(lab)
    port = lab.eth_ports("gpu-a04")[0]
    log = lab.home / "serve-expiry.log"
    admin = lab.gfj("token", "create", "--role", "admin", "--name", "expiry")["secret"]
    with log.open("w") as out, serving(lab.env, "--interval", "0", "--tick", "0.5", output=out) as srv:
        api = {"GPUFABRIC_API": srv.base, "GPUFABRIC_TOKEN": admin}
        for warm in ("alpha", "quarantine"):  # the worker's cold start (its first read of every fabric) before
            lab.gfj("node", "move", "gpu-a04", "--to-tenant", warm, extra_env=api)
        end = datetime.now(UTC) + timedelta(seconds=12)  # the grant applies in 1-3 s; the tick then ends it
        lab.gfj("lease", "create", "--tenant", "beta", "--node", "gpu-a04", "--end", end.isoformat(), extra_env=api)
        assert lab.ovs_tag(port) == nets["beta"][0]
        while lab.ovs_tag(port) != 4000:
            if datetime.now(UTC) > end + timedelta(seconds=30):
                pytest.fail("the ended lease was never released; " + _serve_story(lab, log, "gpu-a04"))
            time.sleep(0.05)
        # the fabrics are applied in parallel: Ethernet's read-back can come before InfiniBand's
        # SUBNET UP, so the release is done when beta's PKey is gone too (serve is not stopped mid-apply)
        while not all(not {e & 0x7FFF for e in t if e & 0x8000} & {nets["beta"][1]}
                      for t in (lab.pkey_tables()[g] for g in lab.guids("gpu-a04"))):  # fmt: skip
            if datetime.now(UTC) > end + timedelta(seconds=30):
                pytest.fail("beta's PKey was never removed; " + _serve_story(lab, log, "gpu-a04"))
            time.sleep(0.05)
        latency = (datetime.now(UTC) - end).total_seconds()
        assert srv.proc.poll() is None, _serve_story(lab, log, "gpu-a04")
    assert lab.ovs_tag(port) == 4000
    assert lab.nvlink_active("gpu-a04") == set()
    print(f"lease end -> node quarantined on every fabric: {latency:.2f} s (worker tick 0.5 s)")
    assert latency < 10.0  # one tick + one quarantine phase
    Path(lab.home / "expiry_latency.txt").write_text(f"{latency:.3f}\n")


def test_lab_up_after_down_puts_the_leases_back(lab: LabEnv) -> None:
    nets = nets_of(lab)
    lab.gfj("node", "move", "gpu-a03", "--to-tenant", "beta")
    port = lab.eth_ports("gpu-a03")[0]
    lab.gf("lab", "down")
    up = lab.gfj("lab", "up", "--nodes", "4", "--hcas-per-node", "1", "--dpus", "2")
    lab.status = up
    assert up["leases_converged"] > 0
    assert lab.ovs_tag(lab.eth_ports("gpu-a03")[0]) == nets["beta"][0] and port == lab.eth_ports("gpu-a03")[0]
    code = lab.gf("audit", "--json", check=False)
    assert code.returncode == 0, code.stdout
