"""OvnLab: up is idempotent (a healthy DPU is kept, one with a dead process is rebuilt), status
reports what runs, down stops exactly the recorded PIDs and removes its namespaces."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from gpufabric.lab.ovn import OvnLab
from gpufabric.lab.procs import pid_alive, read_pid, run

pytestmark = pytest.mark.root


def _netns() -> set[str]:
    return {line.split()[0] for line in run(["ip", "netns", "list"]).splitlines() if line.strip()}


def test_up_idempotent_rebuild_and_down(tmp_path: Path) -> None:
    prefix = f"gfl{os.getpid() % 1000}"
    lab = OvnLab(tmp_path, prefix=prefix)
    try:
        t0 = time.monotonic()
        st = lab.up(["n1", "n2"])
        first = time.monotonic() - t0
        assert st["central"]["running"] and all(d["running"] for d in st["dpus"].values())
        assert first < 10
        pids = {p: read_pid(p) for p in tmp_path.rglob("*.pid")}
        t0 = time.monotonic()
        assert lab.up(["n1", "n2"]) == st
        assert time.monotonic() - t0 < 1.0
        assert {p: read_pid(p) for p in tmp_path.rglob("*.pid")} == pids  # nothing restarted
        ctl = read_pid(lab.dpu_dir("n2") / "ovn-controller.pid")
        assert ctl is not None
        os.kill(ctl, signal.SIGKILL)
        time.sleep(0.1)
        assert not lab.status()["dpus"]["n2"]["running"]
        st2 = lab.up(["n1", "n2", "n3"])
        assert all(d["running"] for d in st2["dpus"].values()) and set(st2["dpus"]) == {"n1", "n2", "n3"}
        assert read_pid(lab.dpu_dir("n1") / "ovs-vswitchd.pid") == pids[lab.dpu_dir("n1") / "ovs-vswitchd.pid"]
        alive = [p for p in (read_pid(f) for f in tmp_path.rglob("*.pid")) if pid_alive(p)]
    finally:
        lab.down()
    assert not [p for p in alive if pid_alive(p)]
    assert not {n for n in _netns() if n.startswith(prefix)}
    assert not lab.state_file.exists()
