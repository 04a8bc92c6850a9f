"""The lab's bonded nodes for real: ``Lab.up(bonded=...)`` makes the leaf's LACP bond Port and
the node's own OVS (bridge br0, bond0 of eth0/eth1, the address on br0) in its namespace; a
second ``up`` reuses them (same PIDs, a tenant VLAN on the bond kept); ``down`` stops the
node's OVS and leaves nothing behind. Needs root.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufabric.fabrics.ethernet.entries import ethernet_ports
from gpufabric.fabrics.ethernet.segments import DEFAULT_QUARANTINE_VLAN as QUARANTINE_VLAN
from gpufabric.lab.bondhost import host_ovs
from gpufabric.lab.lab import Lab, LabStatus
from gpufabric.lab.netns import list_netns
from gpufabric.lab.procs import pid_alive

pytestmark = pytest.mark.root

PARAMS = {"nodes": 3, "hcas_per_node": 1, "gpus_per_node": 0, "bonded": ("gpu-a03",)}


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    lab = Lab(tmp_path_factory.mktemp("gfbond"))
    try:
        t0 = time.monotonic()
        lab.up(**PARAMS)  # type: ignore[arg-type]
        print(f"bonded lab up in {time.monotonic() - t0:.1f}s")
        yield lab
    finally:
        lab.down()


def _ns(st: LabStatus, node: str, *args: str) -> str:
    n = st.node(node)
    assert n is not None
    return subprocess.run(["ip", "-n", n.netns, *args], capture_output=True, text=True, check=True).stdout


def test_bonded_node_has_both_sides_of_the_bond(lab: Lab) -> None:
    st = lab.status()
    assert st.running, st.problems
    a03 = st.node("gpu-a03")
    assert a03 is not None
    bond = a03.ethernet[0].bond
    assert bond == f"{st.prefix}n003b"
    assert [(e.nic, e.ovs_port, e.bond, e.bond_mode) for e in a03.ethernet] == [
        ("eth0", f"{st.prefix}n003p0", bond, "lacp"), ("eth1", f"{st.prefix}n003p1", bond, "lacp")]  # fmt: skip
    ovs = lab.ovs()
    assert ovs.vsctl("get", "port", bond, "tag").strip() == str(QUARANTINE_VLAN)
    assert ovs.vsctl("get", "port", bond, "lacp").strip() == "active"
    assert ovs.vsctl("port-to-br", bond).strip() == a03.ethernet[0].bridge
    host = host_ovs(lab.dir, "gpu-a03", a03.netns)
    assert host.running()
    assert host.vsctl("get", "port", "bond0", "lacp").strip() == "active"
    assert sorted(host.vsctl("list-ifaces", "br0").split()) == ["eth0", "eth1"]
    assert f"inet {a03.ethernet[0].ip} " in _ns(st, "gpu-a03", "-o", "addr", "show", "dev", "br0")
    assert "inet " not in _ns(st, "gpu-a03", "-o", "addr", "show", "dev", "eth0")
    # the plain nodes keep one NIC with its own address, and no host OVS
    a01 = st.node("gpu-a01")
    assert a01 is not None and [(e.nic, e.bond) for e in a01.ethernet] == [("eth0", "")]
    assert not (lab.dir / "hosts" / "gpu-a01").exists()
    inv = {p.name: (p.switch_port, p.bond, p.bond_mode) for p in ethernet_ports(st.inventory().node("gpu-a03"))}
    assert inv == {"eth0": (f"{st.prefix}n003p0", bond, "lacp"), "eth1": (f"{st.prefix}n003p1", bond, "lacp")}


def test_a_second_up_reuses_the_bonds_and_keeps_their_vlan(lab: Lab) -> None:
    st = lab.status()
    a03 = st.node("gpu-a03")
    assert a03 is not None
    host = host_ovs(lab.dir, "gpu-a03", a03.netns)
    pids = host.pids()
    bond = a03.ethernet[0].bond
    lab.ovs().vsctl("set", "port", bond, "tag=2007")  # as a driver would
    again = lab.up(**PARAMS)  # type: ignore[arg-type]
    assert again.running, again.problems
    assert host.pids() == pids
    assert lab.ovs().vsctl("get", "port", bond, "tag").strip() == "2007"


def test_down_stops_the_nodes_own_ovs(lab: Lab) -> None:
    st = lab.status()
    a03 = st.node("gpu-a03")
    assert a03 is not None
    pids = [p for p in host_ovs(lab.dir, "gpu-a03", a03.netns).pids().values() if p]
    assert len(pids) == 2
    lab.down()
    assert not any(pid_alive(p) for p in pids)
    assert not {n.netns for n in st.nodes} & list_netns()
    assert not lab.status().running
    assert Path(lab.dir / "hosts" / "gpu-a03" / "ovs-vswitchd.log").exists()  # logs are kept
