"""Restarting an SM host's OpenSM over SSH (rogue-SM repair): the rendered remote command for a
pid-file SM and a systemd one, the pid-file script run for real on a process here (argv,
environment and working directory kept, new PID in the pid file), and the choice of the SM to
act on by SMInfo (never by configuration order)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gpufabric.domain.errors import ApplyError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.drivers.opensm.control import choose_master
from gpufabric.fabrics.infiniband.drivers.opensm.hosts import SmHostConfig, SshSmHost, parse_sm_hosts, restart_script
from gpufabric.fabrics.infiniband.state import SmSeen, SmState

from fabrics.infiniband.unit.test_ib_smhosts import GOOD, host

G1, G2, ROGUE = Guid(0x11), Guid(0x12), Guid(0x99)


def test_restart_of_a_systemd_sm_is_systemctl_restart_of_its_unit() -> None:
    (cfg,) = parse_sm_hosts([{**GOOD, "reload": "systemctl", "unit": "opensm@ib0"}])
    assert restart_script(cfg) == "systemctl restart opensm@ib0"


def test_restart_of_a_pid_file_sm_reads_the_pid_file_and_restarts_the_same_command() -> None:
    (cfg,) = parse_sm_hosts([{**GOOD, "pid_file": "/run/open sm.pid"}])
    s = restart_script(cfg)
    assert s.startswith("set -e; pf='/run/open sm.pid'; pid=$(cat \"$pf\"")
    assert 'cat "/proc/$pid/environ" "/proc/$pid/cmdline" > "$t/args"' in s
    assert 'kill -TERM "$pid"' in s and "systemctl" not in s
    assert 'setsid xargs -0 -a "$t/args" sh -c \'echo $$ > "$0"; exec env -i "$@"\' "$pf"' in s
    assert subprocess.run(["sh", "-n", "-c", s], check=False).returncode == 0


def _proc(pid: int, what: str) -> bytes:
    return Path(f"/proc/{pid}/{what}").read_bytes()


def test_the_pid_file_restart_starts_the_same_argv_env_and_cwd_again(tmp_path: Path) -> None:
    h = host(tmp_path, "sm-r")
    assert h.cfg.pid_file is not None
    cwd = tmp_path / "scratch"
    cwd.mkdir()
    old = subprocess.Popen(["sleep", "300", "15"], cwd=cwd, env={"SIM_HOST": "sm-01 mlx5_0", "PATH": "/usr/bin:/bin"},
                           stdout=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    h.cfg.pid_file.write_text(f"{old.pid}\n")
    new = None
    try:
        t0 = time.monotonic()
        new = h.restart()
        took = time.monotonic() - t0
        old.wait(5)  # it got SIGTERM (the script saw it as a zombie of this process)
        assert old.returncode == -signal.SIGTERM
        assert new is not None and new != old.pid
        assert h.cfg.pid_file.read_text().strip() == str(new)
        assert _proc(new, "cmdline") == b"sleep\x00300\x0015\x00"
        assert b"SIM_HOST=sm-01 mlx5_0\x00" in _proc(new, "environ")
        assert os.readlink(f"/proc/{new}/cwd") == str(cwd)
        assert os.getsid(new) != os.getsid(0)  # a session of its own: outlives the SSH session
        assert took < 3
    finally:
        old.kill()
        if new:
            os.kill(new, signal.SIGKILL)


def test_restart_with_no_sm_at_the_pid_file_is_an_error_naming_the_host(tmp_path: Path) -> None:
    h = host(tmp_path, "sm-x")
    assert h.cfg.pid_file is not None
    h.cfg.pid_file.write_text("999999999\n")
    with pytest.raises(ApplyError) as ei:
        h.restart()
    assert ei.value.fields["sm_host"] == "sm-x" and "(exit 3)" in ei.value.message


def _seen(g: Guid, state: SmState, prio: int) -> SmSeen:
    return SmSeen(g, 1, prio, state)


def _hosts(tmp: Path) -> tuple[SshSmHost, SshSmHost]:
    a, b = host(tmp, "sm-01"), host(tmp, "sm-02")
    a.port_guid, b.port_guid = G1, G2
    return a, b


def test_the_sm_to_act_on_is_the_one_in_master_state_whatever_the_order(tmp_path: Path) -> None:
    a, b = _hosts(tmp_path)
    seen = {G1: _seen(G1, SmState.STANDBY, 15), G2: _seen(G2, SmState.MASTER, 10)}
    assert choose_master([a, b], seen) is b  # after a failover: sm-02, listed second
    assert choose_master([b, a], {**seen, G2: _seen(G2, SmState.STANDBY, 10), G1: _seen(G1, SmState.MASTER, 15)}) is a


def test_with_no_trusted_master_the_election_winner_is_chosen(tmp_path: Path) -> None:
    a, b = _hosts(tmp_path)  # a rogue is master: both trusted SMs standby
    seen = {
        G1: _seen(G1, SmState.STANDBY, 10),
        G2: _seen(G2, SmState.STANDBY, 14),
        ROGUE: _seen(ROGUE, SmState.MASTER, 15),
    }
    assert choose_master([a, b], seen) is b  # highest priority
    seen[G2] = _seen(G2, SmState.STANDBY, 10)
    assert choose_master([b, a], seen) is a  # equal priority: the lower port GUID
    assert choose_master([a, b], {ROGUE: seen[ROGUE]}) is None  # no SM host answered


def test_a_host_without_port_guid_is_never_chosen(tmp_path: Path) -> None:
    a, b = _hosts(tmp_path)
    a.port_guid = None
    assert choose_master([a, b], {G1: _seen(G1, SmState.MASTER, 15), G2: _seen(G2, SmState.STANDBY, 1)}) is b


def test_sm_host_config_is_frozen_so_restart_cannot_change_it() -> None:
    (cfg,) = parse_sm_hosts([GOOD])
    assert isinstance(cfg, SmHostConfig) and cfg.pid_file == Path("/run/opensm.pid") and cfg.unit is None
