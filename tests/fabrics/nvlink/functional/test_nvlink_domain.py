"""NET02-02 (issue 31) end to end: each node's NVLink domain read through the fmpm driver's
per-node ``smi`` commands (the lab's stand-in answering ``nvidia-smi -q`` with a Fabric section:
an HGX H100 board by default, a multi-node domain once set), printed by ``gpufabric nvlink
domains`` (``--json``; ``--pdsh``: the text to import), recorded with ``inventory import --format
nvidia-smi`` through a real API server, and shown by ``GET /api/v1/nodes/{name}`` and
``gpufabric node show`` (``--json``). A leased node's domain is not taken from what its tenant's
nvidia-smi prints (skipped, reported); a lessee's import and a bad value are refused, nothing written."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gpufabric.lab.fmpm_standin import lab_section

from support.api_world import World, build_world
from support.live_api import gf, live_api

UUID = "5f3c1a2e-0b7d-4c1e-9a8f-2d6e4b7c9a10"
NODES = ("gpu-0000", "gpu-0001")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, str]]:
    w = build_world(tmp_path_factory.mktemp("srv"), nodes=2, leased=1)
    w.ctx.fabrics_settings = lambda: {}
    with live_api(w.ctx) as base:
        yield w, base
    w.store.close()


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    """A home whose fabrics.yaml drives one stand-in FM per node (lab_section, as `lab up` writes it);
    gpu-0001's GPUs report a multi-node NVLink domain, gpu-0000 (leased to alpha) stays an HGX H100 board."""
    home = tmp_path / "home"
    home.mkdir()
    section = lab_section(NODES, tmp_path / "fm")
    (home / "fabrics.yaml").write_text(yaml.safe_dump({"nvlink": section}))
    set_domain(section, "gpu-0001", UUID, "4000000005")
    return home


def set_domain(section: dict[str, object], node: str, cluster: str, clique: str) -> None:
    sock = section["options"]["fm"][node].removeprefix("unix:")  # type: ignore[index]
    cmd = [sys.executable, "-m", "gpufabric.lab.fmpm_standin", "--unix-domain-socket", sock,
           "--standin-set-domain", cluster, clique]  # fmt: skip
    assert subprocess.run(cmd, check=False).returncode == 0


def test_domains_are_read_per_node_imported_and_shown(served: tuple[World, str], lab: Path, tmp_path: Path) -> None:
    w, base = served
    read = gf(lab, "nvlink", "domains", "--json")
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout) == {
        "gpu-0000": {"id": "board:gpu-0000", "cluster_uuid": None, "clique_id": None, "source": "board"},
        "gpu-0001": {"id": f"{UUID}/4000000005", "cluster_uuid": UUID, "clique_id": 4000000005, "source": "nvidia-smi"},
    }
    table = gf(lab, "nvlink", "domains")
    assert f"{UUID}/4000000005" in table.stdout and "board:gpu-0000" in table.stdout, table.stdout
    pdsh = gf(lab, "nvlink", "domains", "--pdsh")
    assert pdsh.returncode == 0 and pdsh.stdout.startswith("gpu-0000: "), pdsh.stderr
    text = tmp_path / "smi.pdsh"
    text.write_text(pdsh.stdout)

    remote = tmp_path / "remote"
    remote.mkdir()
    before = gf(remote, "--api", base, "node", "show", "gpu-0001", "--json", GPUFABRIC_TOKEN=w.tokens["admin"])
    assert json.loads(before.stdout)["fabrics"]["nvlink"]["nvlink_domain"]["source"] == "board"  # nothing recorded yet
    args = ("--api", base, "inventory", "import", str(text), "--format", "nvidia-smi", "--json")
    refused = gf(remote, *args, GPUFABRIC_TOKEN=w.tokens["lessee-alpha"])
    assert refused.returncode == 2 and "may not create nodes" in refused.stdout
    done = gf(remote, *args, GPUFABRIC_TOKEN=w.tokens["admin"])
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["format"] == "nvidia-smi" and doc["nodes"] == 1  # gpu-0000 unchanged: not written
    assert doc["messages"] == [f"gpu-0001: NVLink domain board:gpu-0001 -> {UUID}/4000000005"]

    shown = gf(remote, "--api", base, "node", "show", "gpu-0001", "--json", GPUFABRIC_TOKEN=w.tokens["admin"])
    view = json.loads(shown.stdout)["fabrics"]["nvlink"]
    assert view["nvlink_domain"] == {"id": f"{UUID}/4000000005", "cluster_uuid": UUID, "clique_id": 4000000005,
                                     "source": "nvidia-smi"}  # fmt: skip
    assert len(view["gpus"]) == 8  # the GPUs kept, each with the domain
    plain = gf(remote, "--api", base, "node", "show", "gpu-0001", GPUFABRIC_TOKEN=w.tokens["admin"])
    assert f"NVLink domain {UUID}/4000000005" in plain.stdout, plain.stdout
    board = gf(remote, "--api", base, "node", "show", "gpu-0000", "--json", GPUFABRIC_TOKEN=w.tokens["lessee-alpha"])
    assert json.loads(board.stdout)["fabrics"]["nvlink"]["nvlink_domain"] == {
        "id": "board:gpu-0000", "cluster_uuid": None, "clique_id": None, "source": "board"}  # fmt: skip

    # alpha (root on gpu-0000) makes its nvidia-smi claim gpu-0001's domain: not recorded, reported
    set_domain(yaml.safe_load((lab / "fabrics.yaml").read_text())["nvlink"], "gpu-0000", UUID, "4000000005")
    claim = tmp_path / "claim.pdsh"
    claim.write_text(gf(lab, "nvlink", "domains", "--pdsh").stdout)
    held = json.loads(gf(remote, *args[:4], str(claim), *args[5:], GPUFABRIC_TOKEN=w.tokens["admin"]).stdout)
    assert held["nodes"] == 0 and held["messages"][0].startswith("gpu-0000: skipped: node gpu-0000 is leased")
    still = gf(remote, "--api", base, "node", "show", "gpu-0000", "--json", GPUFABRIC_TOKEN=w.tokens["admin"])
    assert json.loads(still.stdout)["fabrics"]["nvlink"]["nvlink_domain"]["source"] == "board"

    bad = tmp_path / "bad.pdsh"
    bad.write_text(pdsh.stdout.replace("4000000005", "4294967296"))
    no = gf(remote, *args[:4], str(bad), *args[5:], GPUFABRIC_TOKEN=w.tokens["admin"])
    assert no.returncode == 2, no.stdout
    err = json.loads(no.stdout)["error"]
    assert err["field"] == "nvidia-smi -q of gpu-0001: GPU 00000000:19:00.0.CliqueId" and "0-4294967295" in err["allowed"]
    again = gf(remote, "--api", base, "node", "show", "gpu-0001", "--json", GPUFABRIC_TOKEN=w.tokens["admin"])
    assert json.loads(again.stdout)["fabrics"]["nvlink"]["nvlink_domain"]["clique_id"] == 4000000005  # nothing written
