"""A compute node's backend switches on the real lab (issue 31 item 11, NVIDIA NCP NET01-01):
``gpufabric node show`` (and ``--json``: ``GET /nodes/{name}``'s shape) gives each port its path
up the fabric, leaf first. The InfiniBand path is checked against the subnet's own ibnetdiscover
(ibsim: every leaf has an uplink to each spine), the Ethernet one against the OVS patch pairs
that join each leaf bridge to the spine bridge, both read here without gpufabric's drivers."""

from __future__ import annotations

import subprocess
from typing import Any

from gpufabric.fabrics.infiniband.readers.ibnetdiscover import NodeKind, parse_ibnetdiscover
from gpufabric.lab.lab import Lab

from e2e.conftest import LabEnv

LAB_NODES = 6  # two leaves of the lab's IB fabric (4 nodes per leaf)
LAB_GPUS = 0


def _switch_neighbours(lab: LabEnv) -> dict[str, set[str]]:
    """IB switch description -> the switches it is linked to, from ibnetdiscover as the SM node."""
    topo = parse_ibnetdiscover(Lab(lab.home).ib_fabric().run_tool(["ibnetdiscover"], sim_host=lab.status["sm_node"]))
    out: dict[str, set[str]] = {}
    for link in topo.links:
        if link.a.kind is NodeKind.SWITCH and link.b.kind is NodeKind.SWITCH:
            out.setdefault(link.a.description, set()).add(link.b.description)
            out.setdefault(link.b.description, set()).add(link.a.description)
    return out


def _ovs(lab: LabEnv, *args: str) -> str:
    db = f"--db=unix:{lab.status['ovsdb_socket']}"
    return subprocess.run(["ovs-vsctl", db, *args], capture_output=True, text=True, check=True).stdout.strip()


def _patched_to(lab: LabEnv, bridge: str) -> set[str]:
    """The bridges ``bridge``'s patch ports lead to (OVS's own wiring)."""
    out = set()
    for port in _ovs(lab, "list-ports", bridge).split():
        if _ovs(lab, "get", "interface", port, "type") == "patch":
            peer = _ovs(lab, "get", "interface", port, "options:peer").strip("\"")
            out.add(_ovs(lab, "port-to-br", peer))
    return out


def _tiers(path: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    return [(t["tier"], t["switches"]) for t in path]


def test_each_port_path_is_its_leaf_then_the_spine(lab: LabEnv) -> None:
    ib_links = _switch_neighbours(lab)
    seen_leaves = set()
    for name in ("gpu-a01", "gpu-a06"):
        shown = lab.gfj("node", "show", name)
        ib = shown["ports"]["infiniband"]
        assert ib and all(len(q["path"]) == 2 for q in ib)
        for q in ib:
            (tier0, (leaf,)), (tier1, spines) = _tiers(q["path"])
            assert (tier0, tier1) == ("leaf", "spine") and leaf.startswith("leaf-")
            assert spines == sorted(ib_links[leaf]) == ["spine-01", "spine-02"]  # the fabric's own links up
            seen_leaves.add(leaf)
        eth = shown["ports"]["ethernet"]
        assert eth
        for q in eth:
            assert _tiers(q["path"]) == [("leaf", [q["switch"]]), ("spine", [lab.status["spine_bridge"]])]
            assert _patched_to(lab, q["switch"]) == {lab.status["spine_bridge"]}  # as OVS wires it
        text = lab.gf("node", "show", name, extra_env={"COLUMNS": "250"}).stdout  # (no cell wrapped)
        assert f"{ib[0]['path'][0]['switches'][0]} -> spine-01|spine-02" in text
        assert f"{eth[0]['switch']} -> {lab.status['spine_bridge']}" in text
    assert len(seen_leaves) == 2  # gpu-a01 and gpu-a06 hang off different leaves


def test_a_reimport_of_ibnetdiscover_keeps_the_path(lab: LabEnv, tmp_path: Any) -> None:
    before = lab.gfj("node", "show", "gpu-a02")["ports"]["infiniband"]
    text = Lab(lab.home).ib_fabric().run_tool(["ibnetdiscover"], sim_host=lab.status["sm_node"])
    f = tmp_path / "fabric.txt"
    f.write_text(text)
    lab.gf("inventory", "import", str(f), "--format", "ibnetdiscover")
    after = lab.gfj("node", "show", "gpu-a02")["ports"]["infiniband"]
    assert [q["path"] for q in after] == [q["path"] for q in before]
    assert _tiers(after[0]["path"])[1] == ("spine", ["spine-01", "spine-02"])
