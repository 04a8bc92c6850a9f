"""NVLink slots of a shared host (issue 33) against the stand-in ``fmpm`` through real subprocesses:
host ``gpu-a01`` leased to ``infra`` in ``vm-host`` with slots A (4 GPUs), B (2) and C (2), and
``gpu-a02`` leased whole: the stand-in's ``fmpm -l`` lists exactly the three slots' partitions on
the shared host; B's move to tenant D (quarantine, then join) changes B's partition only, while a
sampler reading ``fmpm -l`` sees A's and C's partitions active throughout; an FM restart forgets the
active set and replay brings back the partitions of all live slots."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import BUILTIN_OFFERINGS, Lease, Node
from gpufabric.domain.slots import VM_HOST, slot_name
from gpufabric.domain.values import ModuleId
from gpufabric.fabrics.nvlink.backend import FmpmDriver
from gpufabric.fabrics.nvlink.entries import Gpu, gpu_ports
from gpufabric.fabrics.nvlink.kind import NvlinkKind
from gpufabric.fabrics.nvlink.plan import NvlinkPlan

STANDIN = [sys.executable, "-m", "gpufabric.lab.fmpm_standin"]
KIND = NvlinkKind()
T0 = datetime(2026, 1, 1, tzinfo=UTC)
HOST, OTHER = "gpu-a01", "gpu-a02"
A, B, C = (1, 2, 3, 4), (5, 7), (6, 8)
OFFERINGS = {o.name: o for o in BUILTIN_OFFERINGS}


def fm(sock: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*STANDIN, "--unix-domain-socket", str(sock), *args], capture_output=True, text=True, check=False
    )


def listed(sock: Path) -> dict[int, list[int]]:
    """The active partitions as the stand-in's ``fmpm -l`` lists them: id -> GPU module ids."""
    out = fm(sock, "-l")
    assert out.returncode == 0, out.stdout + out.stderr
    return {
        p["partitionId"]: sorted(g["physicalId"] for g in p["gpuInfo"])
        for p in json.loads(out.stdout)["partitionInfo"]
        if p["isActive"]
    }


@pytest.fixture
def socks(tmp_path: Path) -> dict[str, Path]:
    out = {n: tmp_path / f"{n}.fm" for n in (HOST, OTHER)}
    for p in out.values():
        assert fm(p, "--standin-init", "hgx-h100-8gpu").returncode == 0
    return out


@pytest.fixture
def driver(socks: dict[str, Path]) -> FmpmDriver:
    return FmpmDriver(fm={n: f"unix:{p}" for n, p in socks.items()}, fmpm=STANDIN)


def tenancy(a: str | None, b: str | None, c: str | None) -> Tenancy:
    def board(name: str) -> Node:
        return Node(name, fabric_ports=gpu_ports(*(Gpu(name, ModuleId(m)) for m in range(1, 9))))

    slots = {A: a, B: b, C: c}
    nodes = (board(HOST), board(OTHER), *(Node(slot_name(HOST, m), host=HOST, slot_modules=m) for m in slots))
    owners: dict[str, Lease | None] = {
        HOST: Lease("infra", HOST, T0, offering=VM_HOST),
        OTHER: Lease("acme", OTHER, T0),
        **{slot_name(HOST, m): (Lease(t, slot_name(HOST, m), T0) if t else None) for m, t in slots.items()},
    }
    return Tenancy(nodes=nodes, owners=owners, networks={}, offerings=OFFERINGS)


def converge(driver: FmpmDriver, t: Tenancy) -> NvlinkPlan:
    """One converge step as the engine runs it: observe, diff, apply (removals first); returns the plan."""
    plan = KIND.diff(KIND.desired(t), driver.observe())
    assert isinstance(plan, NvlinkPlan)
    if not plan.empty:
        driver.apply(plan)
    assert KIND.diff(KIND.desired(t), driver.observe()).empty
    return plan


THREE = {1: [1, 2, 3, 4], 5: [5, 7], 6: [6, 8]}
A_LIST, C_LIST = list(A), list(C)


def test_three_slots_then_a_slot_move_changes_only_its_own(driver: FmpmDriver, socks: dict[str, Path]) -> None:
    converge(driver, tenancy("alpha", "beta", "gamma"))
    assert listed(socks[HOST]) == THREE
    assert listed(socks[OTHER]) == {0: list(range(1, 9))}  # the whole-node lease as before

    seen: list[dict[int, list[int]]] = []
    done = threading.Event()

    def sample() -> None:  # A's and C's partitions read while B moves
        while not done.is_set():
            seen.append(listed(socks[HOST]))
            done.wait(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        out = converge(driver, tenancy("alpha", None, "gamma"))  # B's quarantine phase
        after_quarantine = listed(socks[HOST])
        into = converge(driver, tenancy("alpha", "delta", "gamma"))  # B's join, tenant D
    finally:
        done.set()
        sampler.join()
    assert [(c.node, c.activate, c.partition) for c in out.changes] == [(HOST, False, 5)]
    assert after_quarantine == {1: [1, 2, 3, 4], 6: [6, 8]}
    assert [(c.node, c.activate, c.partition, c.tenant) for c in into.changes] == [(HOST, True, 5, "delta")]
    assert listed(socks[HOST]) == THREE and listed(socks[OTHER]) == {0: list(range(1, 9))}
    assert len(seen) >= 2 and all(s[1] == A_LIST and s[6] == C_LIST for s in seen), seen


def test_fm_restart_replays_every_live_slot(driver: FmpmDriver, socks: dict[str, Path]) -> None:
    t = tenancy("alpha", "beta", "gamma")
    converge(driver, t)
    # the backend's last verified set holds all three slots' partitions
    assert fm(socks[HOST], "--standin-restart").returncode == 0
    assert listed(socks[HOST]) == {}
    assert driver.replay(HOST).active == frozenset(THREE)
    assert listed(socks[HOST]) == THREE
    # a backend that verified nothing (a restarted service) replays the kind's active set of the host
    assert fm(socks[HOST], "--standin-restart").returncode == 0
    fresh = FmpmDriver(fm={HOST: f"unix:{socks[HOST]}"}, fmpm=STANDIN)
    assert KIND.active_set(KIND.desired(t), HOST) == frozenset(THREE)
    assert fresh.replay(HOST, KIND.active_set(KIND.desired(t), HOST)).active == frozenset(THREE)
    # and with B in quarantine the replayed set leaves B's GPUs in no partition
    assert fm(socks[HOST], "--standin-restart").returncode == 0
    quiet = tenancy("alpha", None, "gamma")
    assert fresh.replay(HOST, KIND.active_set(KIND.desired(quiet), HOST)).active == frozenset({1, 6})
    assert listed(socks[HOST]) == {1: [1, 2, 3, 4], 6: [6, 8]}
    # the reconcile loop after a restart: the diff re-activates exactly the live slots' partitions
    assert fm(socks[HOST], "--standin-restart").returncode == 0
    plan = converge(driver, t)
    assert sorted((c.activate, c.partition) for c in plan.changes) == [(True, 1), (True, 5), (True, 6)]
    assert listed(socks[HOST]) == THREE
