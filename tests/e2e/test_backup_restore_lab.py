"""Backup while a move runs on the real lab (OVS + OpenSM on ibsim), restore into a fresh home,
then reconcile the restored store against the same fabrics: the report names exactly the nodes
moved after the backup (and the one caught mid-move, by the phase the backup recorded), nothing
for the nodes moved before it; a repair makes the fabrics agree with the restored store again.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from gpufabric.store.backup import backup

from e2e.conftest import GF, LabEnv

pytestmark = pytest.mark.root
LAB_NODES = 4


def _ports_in(drift: dict[str, object], lab: LabEnv, node: str) -> bool:
    """Whether the drift report touches any Ethernet port or IB GUID of ``node``."""
    text = json.dumps(drift).lower()
    return any(p.lower() in text for p in lab.eth_ports(node)) or any(g.lower() in text for g in lab.guids(node))


def _recorded(lab: LabEnv, node: str) -> bool:
    """Whether the store holds a move of ``node`` (read directly: a CLI call takes longer than a move)."""
    import sqlite3

    with sqlite3.connect(f"file:{lab.home / 'gpufabric.db'}?mode=ro", uri=True, timeout=30) as c:
        return c.execute("SELECT count(*) FROM moves WHERE node = ?", (node,)).fetchone()[0] > 0


def test_backup_mid_move_restore_and_reconcile_reports_only_later_moves(lab: LabEnv, tmp_path: Path) -> None:
    lab.gfj("node", "move", "gpu-a01", "--to-tenant", "alpha")
    lab.gfj("node", "move", "gpu-a02", "--to-tenant", "beta")
    mid = subprocess.Popen([GF, "node", "move", "gpu-a03", "--to-tenant", "alpha", "--json"], env=lab.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not _recorded(lab, "gpu-a03"):
            assert mid.poll() is None or mid.returncode == 0, mid.stderr.read() if mid.stderr else ""
            assert time.monotonic() < deadline, "the move of gpu-a03 was never recorded"
            time.sleep(0.05)
        # in-process (no CLI start-up): the copy is taken while the move's phases run
        report = backup(f"sqlite:///{lab.home / 'gpufabric.db'}", tmp_path / "lab.bak").to_dict()
        _out, err = mid.communicate(timeout=180)
        assert mid.returncode == 0, err
    finally:
        if mid.poll() is None:
            mid.kill()
    lab.gfj("node", "move", "gpu-a04", "--to-tenant", "beta")  # after the backup
    assert report["counts"]["moves"] >= 3

    home = tmp_path / "restored"
    env = {"GPUFABRIC_HOME": str(home), "GPUFABRIC_FABRICS": str(lab.home / "fabrics.yaml")}
    if (lab.home / "config.yaml").exists():
        env["GPUFABRIC_CONFIG"] = str(lab.home / "config.yaml")
    restored = lab.gfj("store", "restore", str(tmp_path / "lab.bak"), extra_env=env)
    assert restored["counts"] == report["counts"]
    moves = {m["node"]: m for m in lab.gfj("move", "list", extra_env=env)}
    assert "gpu-a04" not in moves and moves["gpu-a01"]["status"] == moves["gpu-a02"]["status"] == "done"
    caught = moves["gpu-a03"]  # whatever phase the backup caught it in

    drift = lab.gfj("reconcile", "--once", "--policy", "report", extra_env=env)
    assert drift["repaired"] is False and drift["drift_count"] > 0
    touched = {n for n in ("gpu-a01", "gpu-a02", "gpu-a03", "gpu-a04") if _ports_in(drift["drift"], lab, n)}
    print(f"backup caught gpu-a03 at {caught['phase']}/{caught['status']}; drift on {sorted(touched)}")
    assert "gpu-a04" in touched and not touched & {"gpu-a01", "gpu-a02"}
    if caught["status"] == "done":
        assert "gpu-a03" not in touched
    elif caught["phase"] == "quarantine":
        assert "gpu-a03" in touched  # the restored store holds it in quarantine; the fabrics have it in alpha

    repaired = lab.gfj("reconcile", "--once", "--policy", "report", extra_env=env)
    assert repaired["drift_count"] == drift["drift_count"]  # report changed nothing
    lab.gfj("reconcile", "--once", "--policy", "repair", extra_env=env)
    after = lab.gfj("reconcile", "--once", "--policy", "report", extra_env=env)
    assert after["drift_count"] == 0, after["drift"]
