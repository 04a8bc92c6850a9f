"""Fault drills on the real lab, with an independent sampler reading OVS (ovs-vsctl) and the
PKey tables (SMP) the whole time: an InfiniBand failure during the join phase of a move and
during a lease grant, an Ethernet failure during the quarantine phase. Each move ends failed
with one clear error line, every port of the node is sent to quarantine on every fabric (never
split across two tenants), and ``gpufabric move retry`` converges once the fault is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import threading

import pytest

from gpufabric.lab.lab import Lab
from gpufabric.lab.procs import read_pid, stop_pid

from e2e.conftest import GF, LabEnv, owner_of_ports
from e2e.test_move import nets_of

pytestmark = [pytest.mark.root, pytest.mark.timeout(600)]
LAB_NODES = 4


class Sampler(threading.Thread):
    """Reads the owners of ``node``'s ports continuously; records any instant it is in two tenants."""

    def __init__(self, lab: LabEnv, node: str, nets: dict[str, tuple[int, int]]) -> None:
        super().__init__(daemon=True)
        self.lab, self.node, self.nets = lab, node, nets
        self.stop = threading.Event()
        self.samples = 0
        self.split: list[set[str]] = []

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                owners = owner_of_ports(self.lab, self.node, self.nets)
            except Exception:  # a read racing a restart of the SM: try again
                continue
            self.samples += 1
            if len(owners - {"quarantine"}) > 1:
                self.split.append(owners)
            self.stop.wait(0.2)

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.join(timeout=60)
        assert self.samples > 2 and self.split == [], f"node split across tenants: {self.split[:3]}"


def one_error(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 2, p.stdout + p.stderr
    lines = [x for x in p.stderr.strip().splitlines() if x.startswith("error:")]
    assert len(lines) == 1, p.stderr
    return lines[0]


def the_failed_move(lab: LabEnv, node: str) -> dict[str, object]:
    failed = [m for m in lab.gfj("move", "list", "--open") if m["node"] == node]
    assert len(failed) == 1 and failed[0]["status"] == "failed", failed
    return failed[0]


def test_infiniband_failure_during_join_quarantines_every_port_then_retry(lab: LabEnv) -> None:
    nets = nets_of(lab)
    lab.gfj("node", "move", "gpu-a01", "--to-tenant", "alpha")
    fab = Lab(lab.home).ib_fabric()
    with Sampler(lab, "gpu-a01", nets):
        # the move gets through quarantine and the lease swap, then the process dies: it is left at join
        killed = subprocess.run([GF, "node", "move", "gpu-a01", "--to-tenant", "beta"], capture_output=True,
                                env={**lab.env, "GPUFABRIC_KILL_AT": "swap:committed"}, timeout=300, check=False)  # fmt: skip
        assert killed.returncode == -signal.SIGKILL
        stop_pid(fab.opensm_pid)  # the subnet manager is gone when the join runs
        try:
            line = one_error(lab.gf("move", "resume", "--stale-after", "0", check=False, timeout=300))
            assert "infiniband" in line.lower() or "opensm" in line.lower() or "subnet" in line.lower(), line
            move = the_failed_move(lab, "gpu-a01")
            assert move["phase"] == "join"
            assert owner_of_ports(lab, "gpu-a01", nets) == {"quarantine"}, "the failsafe quarantines every port"
            assert lab.nvlink_active("gpu-a01") == set()
        finally:
            lab.gfj("lab", "restart-sm")
        done = lab.gfj("move", "retry", str(move["id"]))
        assert done["moves"][0]["status"] == "done"
    assert owner_of_ports(lab, "gpu-a01", nets) == {"beta"} and lab.nvlink_active("gpu-a01") == {0}


def test_infiniband_failure_during_a_lease_grant_then_retry(lab: LabEnv) -> None:
    nets = nets_of(lab)
    fab = Lab(lab.home).ib_fabric()
    with Sampler(lab, "gpu-a02", nets):
        stop_pid(fab.opensm_pid)
        try:
            line = one_error(lab.gf("lease", "create", "--tenant", "alpha", "--node", "gpu-a02", check=False, timeout=300))
            assert "infiniband" in line.lower() or "opensm" in line.lower() or "subnet" in line.lower(), line
            move = the_failed_move(lab, "gpu-a02")
            assert owner_of_ports(lab, "gpu-a02", nets) == {"quarantine"}
        finally:
            lab.gfj("lab", "restart-sm")
        done = lab.gfj("move", "retry", str(move["id"]))
        assert done["moves"][0]["status"] == "done"
    assert owner_of_ports(lab, "gpu-a02", nets) == {"alpha"}


def test_ethernet_failure_during_quarantine_then_retry(lab: LabEnv) -> None:
    nets = nets_of(lab)
    lab.gfj("node", "move", "gpu-a03", "--to-tenant", "alpha")
    pid = read_pid(lab.home / "lab" / "ovs" / "ovsdb-server.pid")
    assert pid is not None
    with Sampler(lab, "gpu-a03", nets) as sampler:
        os.kill(pid, signal.SIGSTOP)  # the switch's database hangs: the socket is there, nobody answers
        try:
            line = one_error(lab.gf("node", "move", "gpu-a03", "--to-tenant", "beta", check=False, timeout=300))
            assert "ovsdb" in line.lower() or "ethernet" in line.lower() or "timed out" in line.lower(), line
            move = the_failed_move(lab, "gpu-a03")
            assert move["phase"] == "quarantine"
        finally:
            os.kill(pid, signal.SIGCONT)
        sampler.stop.wait(0.5)
        assert owner_of_ports(lab, "gpu-a03", nets) <= {"alpha", "quarantine"}
        done = lab.gfj("move", "retry", str(move["id"]))
        assert done["moves"][0]["status"] == "done"
    assert owner_of_ports(lab, "gpu-a03", nets) == {"beta"}
