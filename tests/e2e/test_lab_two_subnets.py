"""The lab with two InfiniBand subnets, each with its own master/standby OpenSM pair
(``gpufabric lab up --ib-subnets 2 --sm-pair``), driven through the ``gpufabric`` command as a
site would (issue 20, "Must show"): the compute subnet (sm-01 master, sm-02 standby) and the
storage subnet (sm-03 master, sm-04 standby), instances ``ib-compute`` and ``ib-storage`` of
fabrics.yaml, each node with an HCA on each.

A tenant network on the compute subnet only and one on both; moves of a node; ``kill -9`` of
the compute master while two independent SMP samplers (``smpquery pkeys``, one per subnet)
read a tenant's switch port; the compute standby masters its subnet with every tenant's
table unchanged, the storage subnet untouched (same SM processes, same master, same tables);
a move against the new compute master; standbys' partitions files edited by hand reported
(IB-SM-CONFIG-DIVERGED) and repaired by the next write. PKey tables are read by SMP, not
through gpufabric's drivers. Prints the failover time and the test's wall time.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufabric.domain.values import Guid
from gpufabric.engine.fabrics import Fabrics, network_kinds
from gpufabric.fabrics.infiniband.audit.sm_files import sm_file_violations
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMDriver
from gpufabric.lab.ib import SAFE_PARTITIONS, IbFabric
from gpufabric.lab.lab import Lab
from gpufabric.lab.labib import STORAGE, pair
from gpufabric.lab.netfile import SM_NODE, STORAGE_SM_NODE
from gpufabric.lab.smpair import COMPUTE_PAIR, STORAGE_PAIR
from gpufabric.store.registry import Registry

from e2e.conftest import LabEnv
from support import drivers
from support.ib_pair import Sampler, port_lids, port_pkeys, sminfo_master, wait_sminfo_master

pytestmark = pytest.mark.root

LAB_NODES = 2
LAB_SM_PAIR = True
LAB_IB_SUBNETS = 2
LAB_GPUS = 0  # no NVLink stand-ins: this is about the IB subnets
DIVERGED = "IB-SM-CONFIG-DIVERGED"
C, S = "ib-compute", "ib-storage"
SM_OF = {C: SM_NODE, S: STORAGE_SM_NODE}  # each subnet read by SMP as its (first) SM host's HCA


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def create_network_on(lab: LabEnv, name: str, tenant: str, ib_instances: set[str]) -> None:
    """``network create --fabric ...``: a tenant network whose InfiniBand segments are on
    ``ib_instances`` only, on every other instance that allocates segments as a plain
    ``network create`` would."""
    raw = yaml.safe_load((lab.home / "fabrics.yaml").read_text())
    spans = [k.instance for k in network_kinds(raw, Registry.from_entry_points())
             if k.allocates and (k.name != "infiniband" or k.instance in ib_instances)]  # fmt: skip
    lab.gf("network", "create", name, "--tenant", tenant, *(a for i in spans for a in ("--fabric", i)))


def pkeys_of(lab: LabEnv) -> dict[str, dict[str, int]]:
    """network -> instance -> its full-member PKey (0x8000 | id), from ``network list``."""
    return {
        n["name"]: {s["fabric"]: 0x8000 | int(s["pkey"], 16) for s in n["segments"] if s.get("pkey")}
        for n in lab.gfj("network", "list")
    }


class Reader:
    """Every GPU node's switch port and HCA port on one subnet, by SMP (``smpquery pkeys``)."""

    def __init__(self, lab: LabEnv, fab: IbFabric, instance: str) -> None:
        self.fab, self.sm = fab, SM_OF[instance]
        lids = port_lids(fab, self.sm)
        self.ports = {
            n["name"]: (lids[Guid.parse(p["switch_guid"])], p["switch_port"], lids[Guid.parse(p["port_guid"])])
            for n in lab.status["nodes"]
            for p in n["ib"]
            if p.get("instance") == instance
        }

    def tables(self) -> dict[str, tuple[frozenset[int], frozenset[int]]]:
        """node -> (its switch port's table, its HCA port's)."""
        return {n: (port_pkeys(self.fab, sw, swp, self.sm), port_pkeys(self.fab, hca, 1, self.sm))
                for n, (sw, swp, hca) in self.ports.items()}  # fmt: skip

    def sampler(self, node: str, sim_host: str) -> Sampler:
        sw, swp, _hca = self.ports[node]
        return Sampler(self.fab, sw, swp, sim_host=sim_host)


def both(*keys: int) -> tuple[frozenset[int], frozenset[int]]:
    """A port pair's expected tables: the limited default partition and ``keys``."""
    t = frozenset({0x7FFF, *keys})
    return t, t


def diverged(lab: LabEnv) -> list[tuple[str, str, str]]:
    """(fabric, severity, device) of each IB-SM-CONFIG-DIVERGED finding of ``gpufabric audit``."""
    report = lab.gfj("audit", check=False)
    return sorted((v["fabric"], v["severity"], v["device"]) for v in report["violations"] if v["invariant"] == DIVERGED)


def diverged_now(lab: LabEnv) -> list[tuple[str, str]]:
    """The same invariant on each subnet's OpenSM driver of the lab's fabrics.yaml, in this process."""
    fabrics = Fabrics.load(lab.home / "fabrics.yaml", Registry.from_entry_points())
    try:
        out = []
        for name, sm in drivers.sms(fabrics).items():
            assert isinstance(sm, OpenSMDriver)
            out += [(name, v.device) for v in sm_file_violations(sm.observe())]
        return out
    finally:
        fabrics.close()


def test_lab_up_two_subnets_each_with_its_own_sm_pair(lab: LabEnv) -> None:
    st: dict[str, Any] = lab.status
    subs = {s["instance"]: s for s in st["subnets"]}
    assert list(subs) == [C, S]
    assert {i: (s["master"], s["master_state"]) for i, s in subs.items()} == {
        C: ("sm-01 mlx5_0", "SMINFO_MASTER"), S: ("sm-03 mlx5_8", "SMINFO_MASTER"),
    }  # fmt: skip
    assert [[h["name"] for h in s["sm_pair"]["hosts"]] for s in subs.values()] == [
        ["sm-01", "sm-02"],
        ["sm-03", "sm-04"],
    ]
    assert len({s["ibsim_sockname"] for s in subs.values()}) == 2 and subs[S]["ibsim_sockname"].endswith("-storage")
    assert len({Path(s["partitions_conf"]).parent for s in subs.values()}) == 2
    assert st["running"] and st["problems"] == []
    ports = {(n["name"], p["device"], p.get("instance")) for n in st["nodes"] for p in n["ib"]}
    assert ports == {(f"gpu-a0{i}", d, inst) for i in (1, 2) for d, inst in (("mlx5_0", C), ("mlx5_8", S))}
    guids = [p["port_guid"] for n in st["nodes"] for p in n["ib"]]
    assert len(set(guids)) == 4
    fabrics = yaml.safe_load((lab.home / "fabrics.yaml").read_text())
    assert "infiniband" not in fabrics and [(f["name"], f["kind"]) for f in fabrics["fabrics"]] == [
        (C, "infiniband"), (S, "infiniband"),
    ]  # fmt: skip
    own = {f["name"]: f["options"]["trusted_sm_guids"] for f in fabrics["fabrics"]}
    assert own == {
        C: [st["sm_port_guid"], str(COMPUTE_PAIR.standby_port_guid)],
        S: [subs[S]["sm_port_guid"], str(STORAGE_PAIR.standby_port_guid)],
    }
    assert fabrics["trusted_sm_guids"] == [*own[C], *own[S]]
    assert [[h["name"] for h in f["options"]["sm_hosts"]] for f in fabrics["fabrics"]] == [["sm-01", "sm-02"], ["sm-03", "sm-04"]]  # fmt: skip
    shown = lab.gfj("node", "show", "gpu-a01")["fabrics"]
    assert [p["device"] for p in shown[C]["ports"]] == ["mlx5_0"] and [p["device"] for p in shown[S]["ports"]] == [
        "mlx5_8"
    ]
    human = lab.gf("lab", "status").stdout
    assert "subnet ib-compute: master by SMInfo sm-01 mlx5_0" in human
    assert "subnet ib-storage: master by SMInfo sm-03 mlx5_8" in human


def test_kill_9_of_the_compute_master_keeps_every_tenant_and_leaves_storage_untouched(lab: LabEnv) -> None:
    t_test = time.monotonic()
    lab_ = Lab(lab.home)
    fab = {C: lab_.subnet_fabric(C), S: lab_.subnet_fabric(S)}
    sms = {C: pair(lab_.dir, fab[C]), S: pair(lab_.dir, fab[S], STORAGE)}
    create_network_on(lab, "alpha-hpc", "alpha", {C})  # the compute subnet only
    pk = pkeys_of(lab)
    assert set(pk["alpha-hpc"]) == {C} and set(pk["alpha-net"]) == set(pk["beta-net"]) == {C, S}
    assert len({k for net in pk.values() for k in net.values()}) == 5  # no PKey twice, across subnets too
    read = {C: Reader(lab, fab[C], C), S: Reader(lab, fab[S], S)}
    assert read[C].tables() == read[S].tables() == {"gpu-a01": both(), "gpu-a02": both()}  # quarantined

    assert lab.gfj("node", "move", "gpu-a01", "--to-tenant", "alpha")["moves"][0]["status"] == "done"
    assert lab.gfj("node", "move", "gpu-a02", "--to-tenant", "beta")["moves"][0]["status"] == "done"
    want = {
        C: {"gpu-a01": both(pk["alpha-net"][C], pk["alpha-hpc"][C]), "gpu-a02": both(pk["beta-net"][C])},
        S: {"gpu-a01": both(pk["alpha-net"][S]), "gpu-a02": both(pk["beta-net"][S])},  # no alpha-hpc here
    }
    assert {i: r.tables() for i, r in read.items()} == want
    assert all(sha(fab[i].partitions_conf) == sha(sms[i].partitions_conf) for i in (C, S))  # each pair: one file

    storage_pids = (fab[S].opensm_pid, sms[S].standby_pid)
    samplers = {C: read[C].sampler("gpu-a01", "gpu-a02 mlx5_0"), S: read[S].sampler("gpu-a01", "gpu-a02 mlx5_8")}
    for s in samplers.values():
        s.start()
    offset = sms[C].log_offset()
    t0 = time.monotonic()
    sms[C].kill_master()
    t_master = wait_sminfo_master(fab[C], COMPUTE_PAIR.standby_port_guid, t0)
    while not sms[C].log_has(offset, "SUBNET UP"):  # the new master's sweep programmed the subnet
        assert time.monotonic() - t0 < 30, "the new compute master did not bring the subnet up"
        time.sleep(0.05)
    t_up = time.monotonic() - t0
    samples = {i: s.stop() for i, s in samplers.items()}
    for i, got in samples.items():
        assert len(got) >= 5 and got[-1][0] - t0 > t_up, (i, len(got))
        assert {e for _, e in got} == {want[i]["gpu-a01"][0]}, i  # unchanged throughout the takeover
    assert {i: r.tables() for i, r in read.items()} == want  # every tenant's, on both subnets
    assert sminfo_master(fab[S], STORAGE_SM_NODE) == (
        Guid.parse(lab.status["subnets"][1]["sm_port_guid"]),
        "SMINFO_MASTER",
    )
    assert (fab[S].opensm_pid, sms[S].standby_pid) == storage_pids  # the storage SMs never restarted
    st = lab.gfj("lab", "status")  # what `lab status --json` shows
    assert [(s["instance"], s["master"], s["master_state"]) for s in st["subnets"]] == [
        (C, COMPUTE_PAIR.standby_node, "SMINFO_MASTER"), (S, "sm-03 mlx5_8", "SMINFO_MASTER"),
    ]  # fmt: skip
    assert st["problems"] == ["ib-compute: the OpenSM of SM host sm-01 (sm-01 mlx5_0) is not running"]

    fab[C].partitions_conf.write_text(SAFE_PARTITIONS)  # sm-01 (no longer master) edited by hand
    sms[S].partitions_conf.write_text(SAFE_PARTITIONS)  # and the storage standby sm-04
    assert diverged(lab) == [(C, "critical", "sm-01"), (S, "critical", "sm-04")]

    offset = sms[C].log_offset()
    moved = lab.gfj("node", "move", "gpu-a01", "--to-tenant", "beta")  # the next write, on both subnets
    assert moved["moves"][0]["status"] == "done"
    assert sms[C].log_has(offset, "SUBNET UP")  # reloaded: sm-02, the compute master SMInfo names
    assert sminfo_master(fab[C]) == (COMPUTE_PAIR.standby_port_guid, "SMINFO_MASTER")
    want[C]["gpu-a01"], want[S]["gpu-a01"] = both(pk["beta-net"][C]), both(pk["beta-net"][S])
    assert {i: r.tables() for i, r in read.items()} == want
    assert all(sha(fab[i].partitions_conf) == sha(sms[i].partitions_conf) for i in (C, S))  # both repaired
    assert diverged_now(lab) == []
    print(f"\nfailover: kill -9 of sm-01 -> SMInfo names sm-02 master {t_master:.2f} s, its SUBNET UP {t_up:.2f} s; "
          f"{len(samples[C])} compute / {len(samples[S])} storage SMP samples of gpu-a01's switch ports, unchanged; "
          f"test {time.monotonic() - t_test:.1f} s")  # fmt: skip
