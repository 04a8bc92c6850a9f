"""``Lab.up(sm_pair=True)`` again after a failover, and ``Lab.down`` of a pair lab, for real.

After ``kill -9`` of sm-01 the standby sm-02 masters the subnet; a restarted sm-01 (priority 15)
then only enters STANDBY (OpenSM does not take mastership back from a running master), so the
second ``up`` waited 60 s for a SUBNET UP that never came and failed. Now ``up`` stops sm-02,
starts sm-01 as the master and sm-02 as its standby again: the pair as it was made. ``down``
leaves no process of the pair (both OpenSMs, both sshds) and no partitions file behind.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpufabric.lab.lab import Lab, LabStatus
from gpufabric.lab.labib import pair
from gpufabric.lab.procs import pid_alive, read_pid
from gpufabric.lab.smpair import STANDBY_NODE

from support.ib_pair import take_over

pytestmark = pytest.mark.root



def up(lab: Lab) -> LabStatus:
    return lab.up(nodes=1, hcas_per_node=1, gpus_per_node=0, sm_pair=True)


def test_up_after_a_failover_restarts_the_pair_as_made_and_down_leaves_nothing(tmp_path: Path) -> None:
    lab = Lab(tmp_path)
    try:
        st = up(lab)
        assert st.running and st.sm_pair is not None and st.sm_pair.master == "sm-01 mlx5_0"
        fab = lab.ib_fabric()
        sms = pair(lab.dir, fab)
        sshd = [read_pid(s.run_dir / "sshd.pid") for s in sms.sshd.values()]
        took = take_over(sms)
        st = lab.status()
        assert st.sm_pair is not None and st.sm_pair.master == STANDBY_NODE and not st.running
        standby, offset = sms.standby_pid, sms.log_offset()
        t0 = time.monotonic()
        st = up(lab)
        again = time.monotonic() - t0
        assert st.running, st.problems
        assert st.sm_pair is not None and (st.sm_pair.master, st.sm_pair.master_state) == ("sm-01 mlx5_0", "SMINFO_MASTER")
        assert sms.standby_pid != standby and sms.log_has(offset, "Entering STANDBY state")  # sm-02 standby again
        assert [read_pid(s.run_dir / "sshd.pid") for s in sms.sshd.values()] == sshd  # the sshds were kept
        # no timed assertion (bench/ measures speed): the old defect waited 60 s for a SUBNET UP and
        # failed, which `st.running` and the master above catch (a bound of 20 s flaked at 25 s under load)
        print(f"\nkill -9 of sm-01: sm-02 master in {took:.2f} s; lab up again: sm-01 master in {again:.2f} s")
    finally:
        lab.down()
    pids = [fab.ibsim_pid, fab.opensm_pid, sms.standby_pid, *sshd]
    assert pids[:3] == [None, None, None] and not any(pid_alive(p) for p in sshd)
    assert not fab.partitions_conf.exists() and not sms.partitions_conf.exists() and not lab.state_file.exists()
