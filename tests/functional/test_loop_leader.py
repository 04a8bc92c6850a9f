"""One serve replica at a time runs the reconcile loop and the rogue-SM watch (issue 23 item 4):
the loops' lock on SQLite (flock) and PostgreSQL (session advisory lock), its release when the
holder is killed, and two real ``serve`` replicas on one store where the standby takes over
after ``kill -9`` of the leader."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import PgCluster
from gpufabric.lab.serve import free_port, serving
from gpufabric.store.core import Store
from gpufabric.store.loop_leader import LoopLeader

HOLD = """
import sys, time
from gpufabric.store.loop_leader import LoopLeader
from gpufabric.store.core import Store
leader = LoopLeader(Store.open(url=sys.argv[1]))
print(leader.try_lead(), flush=True)
time.sleep(600)
"""


def _holder(url: str) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", HOLD, url], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "True"
    return p


def _takeover(url: str) -> None:
    with Store.open(url=url) as store:
        mine = LoopLeader(store)
        holder = _holder(url)
        try:
            assert mine.try_lead() is False and mine.held is False  # the other process leads
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.wait()
        t0 = time.monotonic()
        while not mine.try_lead():
            assert time.monotonic() - t0 < 10, "the lock of a killed holder was not released"
            time.sleep(0.05)
        assert mine.try_lead() is True  # held: asking again keeps it
        other = LoopLeader(store)
        assert other.try_lead() is False
        mine.release()
        assert other.try_lead() is True
        other.release()


def test_sqlite_one_leader_and_takeover_after_kill(tmp_path: Path) -> None:
    _takeover(f"sqlite:///{tmp_path / 'gf.db'}")


@pytest.mark.postgres
def test_postgres_one_leader_and_takeover_after_kill(postgres_cluster: PgCluster) -> None:
    name = f"leader{os.getpid()}"
    with postgres_cluster.admin() as c:
        c.execute(f'CREATE DATABASE "{name}"')
    try:
        _takeover(postgres_cluster.url(name))
    finally:
        with postgres_cluster.admin() as c:
            c.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _leader_gauge(port: int) -> int:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    (line,) = [x for x in text.splitlines() if x.startswith("gpufabric_loops_leader ")]
    return int(line.split()[1])


def test_two_serve_replicas_one_leads_the_other_takes_over(tmp_path: Path) -> None:
    (tmp_path / "fabrics.yaml").write_text("{}\n")  # fabrics configured (none): the loops run
    env = {**os.environ, "GPUFABRIC_HOME": str(tmp_path)}
    pa, pb = free_port(), free_port()
    with serving(env, "--interval", "60", "--probe-bind", f"127.0.0.1:{pa}") as a, \
         serving(env, "--interval", "60", "--probe-bind", f"127.0.0.1:{pb}"):  # fmt: skip
        assert (_leader_gauge(pa), _leader_gauge(pb)) == (1, 0)
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait()
        t0 = time.monotonic()
        while _leader_gauge(pb) != 1:
            assert time.monotonic() - t0 < 10, "the standby did not take the loops over"
            time.sleep(0.1)
        # the standby tries every LEADER_BEAT (1 s): a few seconds on a loaded machine, never the 60 s
        # reconcile interval (the while loop above fails past 10 s)
