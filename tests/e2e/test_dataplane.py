"""Data plane on the lab, driven only through ``gpufabric``: nodes leased to a tenant ping
each other across leaf/spine switches; other tenants' nodes and quarantined nodes get 100%
loss; after a move the matrix flips. Hosts are the lab's own network namespaces."""

from __future__ import annotations

import pytest

from e2e.conftest import LabEnv

pytestmark = pytest.mark.root
LAB_NODES = 6  # two leaves: gpu-a01..a04 on leaf01, gpu-a05..a06 on leaf02


def matrix(lab: LabEnv, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], bool]:
    return {(a, b): lab.ping(a, b) for a, b in pairs}


def test_ping_matrix_follows_leases_and_moves(lab: LabEnv) -> None:
    assert lab.node("gpu-a01")["ethernet"][0]["bridge"] != lab.node("gpu-a05")["ethernet"][0]["bridge"]
    for node, tenant in (("gpu-a01", "alpha"), ("gpu-a05", "alpha"), ("gpu-a02", "beta"), ("gpu-a06", "beta")):
        lab.gfj("node", "move", node, "--to-tenant", tenant)
    pairs = [("gpu-a01", "gpu-a05"), ("gpu-a02", "gpu-a06"), ("gpu-a01", "gpu-a02"), ("gpu-a05", "gpu-a06"),
             ("gpu-a01", "gpu-a03"), ("gpu-a03", "gpu-a04"), ("gpu-a04", "gpu-a06")]  # fmt: skip
    assert matrix(lab, pairs) == {
        ("gpu-a01", "gpu-a05"): True,  # alpha, across the spine
        ("gpu-a02", "gpu-a06"): True,  # beta, across the spine
        ("gpu-a01", "gpu-a02"): False,  # alpha -> beta
        ("gpu-a05", "gpu-a06"): False,  # alpha -> beta
        ("gpu-a01", "gpu-a03"): False,  # alpha -> quarantine
        ("gpu-a03", "gpu-a04"): False,  # quarantine <-> quarantine, same leaf
        ("gpu-a04", "gpu-a06"): False,  # quarantine -> beta
    }
    lab.gfj("node", "move", "gpu-a05", "--to-tenant", "beta")
    assert matrix(lab, [("gpu-a01", "gpu-a05"), ("gpu-a05", "gpu-a06"), ("gpu-a02", "gpu-a05")]) == {
        ("gpu-a01", "gpu-a05"): False,
        ("gpu-a05", "gpu-a06"): True,
        ("gpu-a02", "gpu-a05"): True,
    }
