"""DPU nodes in a second Kubernetes cluster (``dpu.kubernetes_dpu``, seed 002's "second cluster"
option), end to end through the CLI on real OVN (OvnLab) with two kmock API servers: cluster A
holds the host nodes (labels, DPU-host taint, cordon), cluster B the ``<host>-bf0`` DPU nodes.

* a move into openshift labels the DPU node on B and labels/taints the host on A — and nothing
  of either lands on the other cluster;
* observe and the audit read both: after the node leaves, a DPU label put back on cluster B is
  found (``DPU-ROLE-MISMATCH``, device ``gpu-a01-bf0``) and the audit is clean once it is gone."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpufabric.cli.main import app
from gpufabric.domain.errors import GpufabricError
from gpufabric.lab.ovn import OvnLab

from support.kmock_evict import EvictBox, api_of, kmock_evicting

pytestmark = pytest.mark.root

NODES = ["gpu-a01", "gpu-a02"]


@dataclass
class World:
    home: Path
    hosts: Any  # cluster A (host nodes)
    dpus: Any  # cluster B (DPU nodes)
    box_a: EvictBox
    box_b: EvictBox

    def cli(self, *args: str) -> tuple[int, str]:
        r = CliRunner().invoke(app, list(args), env={"GPUFABRIC_HOME": str(self.home)})
        if isinstance(r.exception, GpufabricError):
            return 2, r.output + r.exception.message
        return r.exit_code, r.output

    def labels(self, api: Any, node: str) -> dict[str, str]:
        return dict(api.read_node(node).metadata.labels or {})

    def taints(self, api: Any, node: str) -> list[tuple[str, str]]:
        spec = api.read_node(node).spec
        return sorted((t.key, t.effect) for t in ((spec.taints if spec else None) or []))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    home = tmp_path_factory.mktemp("gf2")
    lab = OvnLab(home / "ovn", prefix=f"gfk{os.getpid() % 1000}")
    try:
        lab.up(NODES)
        with kmock_evicting() as box_a, kmock_evicting() as box_b:
            hosts, dpus = api_of(box_a.url), api_of(box_b.url)
            for n in NODES:  # each cluster registers only its own nodes
                hosts.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}})
                dpus.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"{n}-bf0"}})
            section = lab.fabrics_section({"host": box_a.url}) | {
                "kubernetes_dpu": {"host": box_b.url}, "mst": {"verify": False}, "drain": {"timeout": 2},
            }  # fmt: skip
            (home / "fabrics.yaml").write_text(yaml.safe_dump({"dpu": section}))
            inv = {"nodes": [{"name": n, "dpus": [{"name": "bf0", "mode": "dpu", "representors": "pf0vf1",
                                                   "nic_model": "BlueField-2"}]} for n in NODES]}  # fmt: skip
            (home / "inventory.yaml").write_text(yaml.safe_dump(inv))
            w = World(home, hosts, dpus, box_a, box_b)
            for args in (("inventory", "import", str(home / "inventory.yaml")), ("tenant", "create", "acme")):
                code, out = w.cli(*args)
                assert code == 0, out
            yield w
    finally:
        lab.down()


def _audit(world: World) -> list[dict[str, Any]]:
    code, out = world.cli("audit", "--json")
    assert code in (0, 1), out
    return [v for v in json.loads(out)["violations"] if v.get("fabric") == "dpu"]


def test_move_into_openshift_labels_dpu_on_b_and_host_on_a(world: World) -> None:
    code, out = world.cli("node", "move", "gpu-a01", "--to-tenant", "acme", "--offering", "openshift")
    assert code == 0, out
    dpu = world.labels(world.dpus, "gpu-a01-bf0")
    host = world.labels(world.hosts, "gpu-a01")
    assert {k: dpu[k] for k in ("k8s.ovn.org/dpu", "network.operator.openshift.io/dpu")} == {
        "k8s.ovn.org/dpu": "", "network.operator.openshift.io/dpu": ""}  # fmt: skip
    assert host["k8s.ovn.org/dpu-host"] == "" and host["gpufabric.io/tenant"] == "acme"
    assert world.taints(world.hosts, "gpu-a01") == [("k8s.ovn.org/dpu-host", "NoSchedule")]
    assert not any(k.startswith("k8s.ovn.org/dpu-host") for k in dpu) and "k8s.ovn.org/dpu" not in host
    assert world.taints(world.dpus, "gpu-a01-bf0") == []
    # cluster B saw only the DPU node's requests; cluster A never heard of gpu-a01-bf0
    assert {p for _, p, _ in world.box_b.log if p.startswith("/api/v1/nodes/")} == {"/api/v1/nodes/gpu-a01-bf0"}
    assert not [p for _, p, _ in world.box_a.log if "bf0" in p]
    assert _audit(world) == []  # observe reads both clusters: the DPU labels on B count


def test_dpu_label_left_on_b_after_leaving_is_found(world: World) -> None:
    assert world.labels(world.dpus, "gpu-a01-bf0").get("k8s.ovn.org/dpu") == ""
    code, out = world.cli("node", "move", "gpu-a01", "--to-tenant", "quarantine")
    assert code == 0, out
    assert "k8s.ovn.org/dpu" not in world.labels(world.dpus, "gpu-a01-bf0")
    assert "k8s.ovn.org/dpu-host" not in world.labels(world.hosts, "gpu-a01")
    assert _audit(world) == []
    world.dpus.patch_node("gpu-a01-bf0", {"metadata": {"labels": {"k8s.ovn.org/dpu": ""}}})  # left behind on B
    found = _audit(world)
    assert [(v["invariant"], v["device"], v["node"]) for v in found] == [("DPU-ROLE-MISMATCH", "gpu-a01-bf0", "gpu-a01")]
    assert "DPU labelled: True" in found[0]["message"]
    world.dpus.patch_node("gpu-a01-bf0", {"metadata": {"labels": {"k8s.ovn.org/dpu": None}}})
    assert _audit(world) == []
