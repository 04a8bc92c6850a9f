"""Faults during a move on the real lab: the trusted OpenSM stopped, OVSDB unreachable.
Each gives one clear error line; the node ends in quarantine or its old tenant (never in
two); after the fault is gone, ``gpufabric move retry`` converges."""

from __future__ import annotations

import os
import signal

import pytest

from gpufabric.lab.lab import Lab
from gpufabric.lab.procs import read_pid, stop_pid

from e2e.conftest import LabEnv, owner_of_ports
from e2e.test_move import nets_of

pytestmark = pytest.mark.root


def failed_move(lab: LabEnv, node: str, to: str) -> tuple[str, dict[str, object]]:
    p = lab.gf("node", "move", node, "--to-tenant", to, check=False, timeout=300)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = [x for x in p.stderr.strip().splitlines() if x.startswith("error:")]
    assert len(lines) == 1, p.stderr
    failed = [m for m in lab.gfj("move", "list", "--open") if m["node"] == node]
    assert len(failed) == 1 and failed[0]["status"] == "failed"
    return lines[0], failed[0]


@pytest.mark.full  # make test: the fault drills (IB failure during join and during a grant, then retry)
def test_opensm_stopped_then_retry(lab: LabEnv) -> None:
    nets = nets_of(lab)
    lab.gfj("node", "move", "gpu-a01", "--to-tenant", "alpha")
    fab = Lab(lab.home).ib_fabric()
    stop_pid(fab.opensm_pid)
    try:
        line, move = failed_move(lab, "gpu-a01", "beta")
        assert "opensm" in line.lower() or "infiniband" in line.lower(), line
        owners = owner_of_ports(lab, "gpu-a01", nets)
        assert owners <= {"alpha", "quarantine"} and owners, owners
    finally:
        lab.gfj("lab", "restart-sm")
    done = lab.gfj("move", "retry", str(move["id"]))
    assert done["moves"][0]["status"] == "done"
    assert owner_of_ports(lab, "gpu-a01", nets) == {"beta"}


@pytest.mark.full  # make test: the fault drills (Ethernet failure during quarantine, then retry)
def test_ovsdb_unreachable_then_retry(lab: LabEnv) -> None:
    nets = nets_of(lab)
    lab.gfj("node", "move", "gpu-a02", "--to-tenant", "alpha")
    pid = read_pid(lab.home / "lab" / "ovs" / "ovsdb-server.pid")
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # the socket is there, nobody answers
    try:
        line, move = failed_move(lab, "gpu-a02", "beta")
        assert "ovsdb" in line.lower() or "ethernet" in line.lower() or "timed out" in line.lower(), line
    finally:
        os.kill(pid, signal.SIGCONT)
    assert owner_of_ports(lab, "gpu-a02", nets) <= {"alpha", "quarantine"}
    done = lab.gfj("move", "retry", str(move["id"]))
    assert done["moves"][0]["status"] == "done"
    assert owner_of_ports(lab, "gpu-a02", nets) == {"beta"}
