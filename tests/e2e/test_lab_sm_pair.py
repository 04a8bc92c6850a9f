"""The main lab with its trusted SMs as a master/standby OpenSM pair (``gpufabric lab up
--sm-pair``), driven through the ``gpufabric`` command as a site would: both SM hosts in
fabrics.yaml (``sm_hosts``, each over its own sshd), a lease, ``kill -9`` of the master, and a
move against the new master. PKey tables are read by SMP (``smpquery pkeys`` of the node's
switch port, where OpenSM programs partition enforcement, and of the HCAs), not through
gpufabric's driver. Prints the failover time (kill -9 -> SMInfo names sm-02 master) and the
test's wall time.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest
import yaml

from gpufabric.domain.values import Guid
from gpufabric.engine.fabrics import Fabrics
from gpufabric.fabrics.infiniband.audit.sm_files import sm_file_violations
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMDriver
from gpufabric.lab.ib import SAFE_PARTITIONS
from gpufabric.lab.lab import Lab
from gpufabric.lab.labib import pair
from gpufabric.lab.smpair import STANDBY_NODE, STANDBY_PORT_GUID
from gpufabric.store.registry import Registry

from e2e.conftest import LabEnv, owner_of_ports
from e2e.test_move import nets_of
from support import drivers
from support.ib_pair import Sampler, port_lids, port_pkeys, sminfo_master, wait_sminfo_master

pytestmark = pytest.mark.root

LAB_NODES = 3
LAB_SM_PAIR = True
LAB_GPUS = 0  # no NVLink stand-ins: this is about the IB subnet (and < 40 s)
DIVERGED = "IB-SM-CONFIG-DIVERGED"


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def diverged(lab: LabEnv) -> list[tuple[str, str]]:
    """(severity, device) of each IB-SM-CONFIG-DIVERGED finding of ``gpufabric audit``."""
    report = lab.gfj("audit", check=False)
    return [(v["severity"], v["device"]) for v in report["violations"] if v["invariant"] == DIVERGED]


def diverged_now(lab: LabEnv) -> list[tuple[str, str]]:
    """The same invariant on the OpenSM driver that the lab's fabrics.yaml configures, in this
    process (``gpufabric audit`` costs ~4 s here; this ~1 s)."""
    sm = drivers.sm(Fabrics.load(lab.home / "fabrics.yaml", Registry.from_entry_points()))
    assert isinstance(sm, OpenSMDriver)
    try:
        return [(v.severity.value, v.device) for v in sm_file_violations(sm.observe())]
    finally:
        sm.close()


def test_lab_up_sm_pair_records_both_sm_hosts_and_drives_both(lab: LabEnv) -> None:
    st = lab.status
    assert [(h["name"], h["node"], h["port_guid"]) for h in st["sm_pair"]["hosts"]] == [
        ("sm-01", "sm-01 mlx5_0", st["sm_port_guid"]), ("sm-02", STANDBY_NODE, str(STANDBY_PORT_GUID)),
    ]  # fmt: skip
    assert (st["sm_pair"]["master"], st["sm_pair"]["master_state"]) == ("sm-01 mlx5_0", "SMINFO_MASTER")
    assert [n["name"] for n in st["nodes"]] == ["gpu-a01", "gpu-a02", "gpu-a03"]  # sm-02 is no GPU node
    assert st["running"] and st["problems"] == []
    fabrics = yaml.safe_load((lab.home / "fabrics.yaml").read_text())
    opts = fabrics["infiniband"]["options"]
    assert [(h["name"], h["port_guid"]) for h in opts["sm_hosts"]] == [
        ("sm-01", st["sm_port_guid"]), ("sm-02", str(STANDBY_PORT_GUID)),
    ]  # fmt: skip
    assert not {"partitions_conf", "log_path", "pid_file"} & set(opts)
    assert fabrics["trusted_sm_guids"] == fabrics["sm_port_guids"] == [st["sm_port_guid"], str(STANDBY_PORT_GUID)]
    human = lab.gf("lab", "status").stdout
    assert "SM pair: master by SMInfo sm-01 mlx5_0" in human and "sm-02 'sm-02 mlx5_0'" in human


def test_kill_9_of_the_master_keeps_the_tenant_and_a_move_works_against_the_new_master(lab: LabEnv) -> None:
    t_test = time.monotonic()
    nets = nets_of(lab)
    alpha, beta = 0x8000 | nets["alpha"][1], 0x8000 | nets["beta"][1]
    lab_ = Lab(lab.home)
    fab = lab_.ib_fabric()
    sms = pair(lab_.dir, fab)
    port = lab.node("gpu-a01")["ib"][0]
    lids = port_lids(fab)
    leaf, hca = lids[Guid.parse(port["switch_guid"])], lids[Guid.parse(port["port_guid"])]

    def tables() -> tuple[frozenset[int], frozenset[int]]:
        """gpu-a01's switch port and HCA port, by SMP."""
        return port_pkeys(fab, leaf, port["switch_port"]), port_pkeys(fab, hca, 1)

    assert tables() == ({0x7FFF}, {0x7FFF})  # quarantined: the limited default partition only
    assert lab.gfj("node", "move", "gpu-a01", "--to-tenant", "alpha")["moves"][0]["status"] == "done"
    assert tables() == ({0x7FFF, alpha}, {0x7FFF, alpha})
    assert sha(fab.partitions_conf) == sha(sms.partitions_conf)  # the standby got the same file

    sampler = Sampler(fab, leaf, port["switch_port"], sim_host="gpu-a03 mlx5_0")
    sampler.start()
    offset = sms.log_offset()
    t0 = time.monotonic()
    sms.kill_master()
    t_master = wait_sminfo_master(fab, STANDBY_PORT_GUID, t0)
    while not sms.log_has(offset, "SUBNET UP"):  # the new master's sweep programmed the fabric
        assert time.monotonic() - t0 < 30, "the new master did not bring the subnet up"
        time.sleep(0.05)
    t_up = time.monotonic() - t0
    samples = sampler.stop()
    assert len(samples) >= 5 and samples[-1][0] - t0 > t_up
    assert {e for _, e in samples} == {frozenset({0x7FFF, alpha})}  # unchanged throughout the takeover
    assert tables() == ({0x7FFF, alpha}, {0x7FFF, alpha})
    st = lab_.status()  # what `lab status` shows
    assert st.sm_pair is not None and (st.sm_pair.master, st.sm_pair.master_state) == (STANDBY_NODE, "SMINFO_MASTER")
    assert st.problems == ("the OpenSM of SM host sm-01 (sm-01 mlx5_0) is not running",)

    fab.partitions_conf.write_text(SAFE_PARTITIONS)  # sm-01 (now the standby) edited by hand
    assert diverged(lab) == [("critical", "sm-01")]

    offset = sms.log_offset()
    moved = lab.gfj("node", "move", "gpu-a01", "--to-tenant", "beta")  # the next write: both SMs
    assert moved["moves"][0]["status"] == "done"
    assert sms.log_has(offset, "SUBNET UP")  # reloaded: sm-02, the master SMInfo names
    assert sminfo_master(fab) == (STANDBY_PORT_GUID, "SMINFO_MASTER")
    assert tables() == ({0x7FFF, beta}, {0x7FFF, beta})
    assert owner_of_ports(lab, "gpu-a01", nets) == {"beta"}  # Ethernet too, and no other tenant's PKey
    assert sha(fab.partitions_conf) == sha(sms.partitions_conf)  # sm-01's file repaired
    assert diverged_now(lab) == []
    print(f"\nfailover: kill -9 of sm-01 -> SMInfo names sm-02 master {t_master:.2f} s, its SUBNET UP "
          f"{t_up:.2f} s; {len(samples)} SMP samples of gpu-a01's switch port, all with 0x{alpha:04x}; "
          f"test {time.monotonic() - t_test:.1f} s")  # fmt: skip
