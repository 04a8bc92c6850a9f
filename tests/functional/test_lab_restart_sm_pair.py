"""``gpufabric lab restart-sm`` on the SM pair (:func:`gpufabric.lab.labib.restart_trusted_sm`)
restarts the SM SMInfo names master: sm-01 alone while it masters (the standby's PID kept);
after a failover (sm-02 master) the pair as ``lab up`` makes it, sm-01 master, sm-02 standby."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufabric.lab.ib import IbFabric
from gpufabric.lab.labib import SMINFO, restart_trusted_sm
from gpufabric.lab.netfile import SM_NODE, hca_port_guid
from gpufabric.lab.smpair import STANDBY_NODE, STANDBY_PORT_GUID, SmPair

from support.ib_pair import port_lids, sm_pair_lab, take_over

pytestmark = pytest.mark.root

SM = hca_port_guid(0, 0)
STATE = {"sm_pair": {"standby_node": STANDBY_NODE}, "sm_host": SM_NODE, "sm_node": SM_NODE, "sm_port_guid": str(SM)}


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[IbFabric, SmPair]]:
    with sm_pair_lab(tmp_path, f"gf-t-lrs-{os.getpid()}") as both:
        yield both


def roles(fab: IbFabric) -> tuple[str, str]:
    lids = port_lids(fab)
    out = [fab.run_tool(["sminfo", str(lids[g])], sim_host=SM_NODE) for g in (SM, STANDBY_PORT_GUID)]
    m = [SMINFO.search(o) for o in out]
    return (m[0].group(2) if m[0] else out[0], m[1].group(2) if m[1] else out[1])


def test_restart_sm_restarts_the_master_only_or_the_pair_after_a_failover(lab: tuple[IbFabric, SmPair]) -> None:
    fab, pair = lab
    master_pid, standby_pid = fab.opensm_pid, pair.standby_pid
    out = restart_trusted_sm(fab, pair, STATE)
    assert (out["restarted"], out["master_before"]) == (["sm-01"], SM_NODE)
    assert out["opensm_pid"] not in (None, master_pid) and pair.standby_pid == standby_pid
    assert roles(fab) == ("SMINFO_MASTER", "SMINFO_STANDBY")
    take_over(pair)  # kill -9 of sm-01: sm-02 masters
    out = restart_trusted_sm(fab, pair, STATE)
    assert (out["restarted"], out["master_before"]) == (["sm-01", "sm-02"], STANDBY_NODE)
    assert out["standby_pid"] not in (None, standby_pid)
    assert roles(fab) == ("SMINFO_MASTER", "SMINFO_STANDBY")
    assert restart_trusted_sm(fab, None, {})["restarted"] == ["sm-01"]  # no pair: the one OpenSM
