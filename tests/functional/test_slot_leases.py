"""Slot leases of a shared host (issue 33) through the user's commands, on Fabric Manager's
stand-in (fmpm's command line and JSON; real FM cannot run here): a host leased in ``vm-host``
is carved into slots by ``lease create --gpus N``, one NVLink partition each, read back with
``fmpm -l``; several tenants hold slots of one host at once; a slot's move or end changes only
its own partition; a slot has its host's owner; bad input is one line naming the field, and
nothing is written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpufabric.lab.fmpm_standin import lab_section

from support.live_api import gf

STANDIN = [sys.executable, "-m", "gpufabric.lab.fmpm_standin"]
HOSTS = ("gpu-a01", "gpu-b01")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    (h / "fabrics.yaml").write_text(yaml.safe_dump({"nvlink": lab_section(HOSTS, tmp_path / "fm")}))
    gpus = [{"module_id": m} for m in range(1, 9)]
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump({"nodes": [{"name": n, "gpus": gpus} for n in HOSTS]}))
    assert ok(gf(h, "inventory", "import", str(tmp_path / "inv.yaml")))
    for t in ("infra", "a", "b", "c", "d"):
        assert ok(gf(h, "tenant", "create", t))
    return h


def ok(r: subprocess.CompletedProcess[str]) -> bool:
    assert r.returncode == 0, r.stderr + r.stdout
    return True


def refused(r: subprocess.CompletedProcess[str], *words: str) -> str:
    assert r.returncode != 0, r.stdout
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1 and all(w in line for w in words), line
    return line


def active(home: Path, host: str) -> dict[int, list[int]]:
    """The partitions FM holds active on ``host``, by id, with their GPUs (``fmpm -l``)."""
    section = yaml.safe_load((home / "fabrics.yaml").read_text())["nvlink"]
    sock = section["options"]["fm"][host].removeprefix("unix:")
    out = subprocess.run([*STANDIN, "--unix-domain-socket", sock, "-l"], capture_output=True, text=True, check=True)
    parts = json.loads(out.stdout)["partitionInfo"]
    return {p["partitionId"]: sorted(g["physicalId"] for g in p["gpuInfo"]) for p in parts if p["isActive"]}


def nodes(home: Path) -> dict[str, dict[str, object]]:
    r = gf(home, "node", "list", "--json")
    assert ok(r)
    return {n["name"]: n for n in json.loads(r.stdout)}


def lease_slot(home: Path, tenant: str, k: int, host: str = "gpu-a01") -> str:
    r = gf(home, "lease", "create", "--node", host, "--gpus", str(k), "--tenant", tenant, "--no-networks", "--json")
    assert ok(r)
    return str(json.loads(r.stdout)["moves"][0]["node"])


def test_three_tenants_hold_slots_of_one_host_each_its_own_partition(home: Path) -> None:
    before = nodes(home)
    refused(gf(home, "lease", "create", "--slot", "--node", "gpu-a01", "--gpus", "2", "--tenant", "a", "--no-networks"),
            "node", "vm-host")  # fmt: skip
    assert nodes(home).keys() == before.keys()
    assert ok(gf(home, "node", "owner", "gpu-a01", "--tenant", "infra"))
    assert ok(gf(home, "lease", "create", "--node", "gpu-a01", "--tenant", "infra", "--offering", "vm-host", "--no-networks"))
    assert active(home, "gpu-a01") == {}  # the hypervisor holds no GPU
    refused(gf(home, "lease", "create", "--node", "gpu-a01", "--gpus", "3", "--tenant", "a", "--no-networks"), "gpus", "1, 2, 4 or 8")
    a, b, c = lease_slot(home, "a", 4), lease_slot(home, "b", 2), lease_slot(home, "c", 2)
    shown = nodes(home)
    mods = {s: set(json.loads(gf(home, "node", "show", s, "--json").stdout)["slot_modules"]) for s in (a, b, c)}
    assert [len(mods[s]) for s in (a, b, c)] == [4, 2, 2] and not (mods[a] & mods[b] or mods[a] & mods[c] or mods[b] & mods[c])
    assert {shown[s]["tenant"] for s in (a, b, c)} == {"a", "b", "c"}
    assert {shown[s]["owner"] for s in (a, b, c)} == {"infra"}  # owners apply per slot: the host's owner
    three = active(home, "gpu-a01")
    assert sorted(map(set, three.values()), key=min) == sorted((mods[a], mods[b], mods[c]), key=min)
    assert active(home, "gpu-b01") == {}
    # nothing free for another 2-GPU slot: refused naming gpus, nothing written
    line = refused(gf(home, "lease", "create", "--node", "gpu-a01", "--gpus", "2", "--tenant", "d", "--no-networks"), "gpus")
    assert "overlaps" in line or "free" in line or "none" in line, line
    assert nodes(home).keys() == shown.keys()
    # the host keeps its lease and offering while slots live
    refused(gf(home, "node", "move", "gpu-a01", "--to-tenant", "d"), "live slots")
    # B's slot to tenant d: its partition leaves and comes back, A's and C's stay active all along
    a_c = {i: g for i, g in three.items() if set(g) != mods[b]}
    assert ok(gf(home, "node", "move", b, "--to-tenant", "d"))
    after = active(home, "gpu-a01")
    assert {i: g for i, g in after.items() if set(g) != mods[b]} == a_c and sorted(after.values()) == sorted(three.values())
    assert nodes(home)[b]["tenant"] == "d"
    # C's lease ends: its partition is deactivated, the others stay; a new 2-GPU slot reuses C's GPUs
    lease_c = next(x for x in json.loads(gf(home, "lease", "list", "--json").stdout) if x["node"] == c and x["active"])
    assert ok(gf(home, "lease", "delete", str(lease_c["id"])))
    assert sorted(map(set, active(home, "gpu-a01").values()), key=min) == sorted((mods[a], mods[b]), key=min)
    assert lease_slot(home, "d", 2) == c
