"""The lab for real: ibsim + OpenSM + OVS (own netns) + one netns per node, under a temp GPUFABRIC_HOME.

One module-scoped lab (6 nodes x 2 HCAs, 1 NIC each); the last test takes it down and checks
that nothing is left behind. Needs root and the Debian packages of scripts/setup.sh.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufabric.cli.lab_cmd import app as lab_group
from gpufabric.domain.values import Guid
from gpufabric.fabrics.ethernet.entries import ethernet_ports
from gpufabric.fabrics.infiniband.entries import all_ib_ports
from gpufabric.fabrics.infiniband.inventory.match import ib_ports_from_topology
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import parse_ibnetdiscover
from gpufabric.lab.lab import Lab, LabStatus
from gpufabric.lab.netfile import generate_netfile
from gpufabric.lab.procs import pid_alive

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gfhome")


@pytest.fixture(scope="module")
def lab(home: Path) -> Iterator[Lab]:
    lab = Lab(home)
    try:
        lab.up(nodes=6, hcas_per_node=2, eth_ports_per_node=1)
        yield lab
    finally:
        lab.down()


@pytest.fixture(scope="module")
def first(lab: Lab) -> LabStatus:
    return lab.status()


def test_status_is_complete(first: LabStatus, home: Path) -> None:
    assert first.running, first.problems
    assert [n.name for n in first.nodes] == [f"gpu-a0{i}" for i in range(1, 7)]
    assert first.sm_node == "sm-01 mlx5_0"
    assert first.sm_port_guid == "0x0002c90310000001"
    assert first.ibsim_sockname.startswith(first.prefix)
    assert Path(first.opensm_log).is_relative_to(home / "lab")
    assert Path(first.ovsdb_socket).exists()
    assert all(len(n.ib) == 2 and len(n.ethernet) == 1 for n in first.nodes)
    inv = first.inventory()
    a05 = inv.node("gpu-a05")
    assert a05 is not None
    assert (ethernet_ports(a05)[0].switch, ethernet_ports(a05)[0].switch_port) == (f"{first.prefix}-leaf02", f"{first.prefix}n005p0")
    assert [(p.device, p.port_guid) for p in all_ib_ports(a05)] == [
        ("mlx5_0", Guid(0x0002C90310000501)),
        ("mlx5_1", Guid(0x0002C90310000511)),
    ]
    assert json.loads(json.dumps(first.to_dict()))["nodes"][4]["ib"][1]["port_guid"] == "0x0002c90310000511"


def test_port_guids_equal_what_ibnetdiscover_reports(lab: Lab, first: LabStatus) -> None:
    text = lab.ib_fabric().run_tool(["ibnetdiscover"], sim_host="gpu-a04 mlx5_1")
    found = {
        (p.node, p.device, p.port_num, p.port_guid, p.node_guid)
        for p in ib_ports_from_topology(parse_ibnetdiscover(text))
    }
    ours = {(p.node, p.device, p.port_num, p.port_guid, p.node_guid) for n in first.nodes for p in n.ib}
    assert len(ours) == 12
    assert ours == {f for f in found if f[0] != "sm-01"}


def test_smpquery_pkeys_answers_on_every_hca_port(lab: Lab, first: LabStatus) -> None:
    fab = lab.ib_fabric()
    topo = parse_ibnetdiscover(fab.run_tool(["ibnetdiscover"], sim_host="gpu-a01 mlx5_0"))
    lids = {p.port_guid: p.lid for ca in topo.cas() for p in ca.ports}
    for node in first.nodes:
        for port in node.ib:
            lid = lids[port.port_guid]
            assert lid and lid > 0
            out = fab.run_tool(["smpquery", "pkeys", str(lid), str(port.port_num)], sim_host="sm-01 mlx5_0")
            # the safe initial partitions.conf: every CA a limited member of the default partition
            assert out.split()[1] == "0x7fff", (node.name, port.device, out[:80])
    sm_lid = next(p.lid for ca in topo.cas() if ca.description == "sm-01 mlx5_0" for p in ca.ports)
    out = fab.run_tool(["smpquery", "pkeys", str(sm_lid), "1"], sim_host="sm-01 mlx5_0")
    assert out.split()[1] == "0xffff"
    assert "PARSE ERROR" not in Path(first.opensm_log).read_text()


def test_each_netns_has_its_nic_and_ovs_port_on_its_leaf(lab: Lab, first: LabStatus) -> None:
    ovs = lab.ovs()
    for node in first.nodes:
        for e in node.ethernet:
            out = subprocess.run(
                ["ip", "-n", node.netns, "-o", "addr", "show", "dev", e.nic], capture_output=True, text=True, check=True
            ).stdout
            assert f"inet {e.ip} " in out
            link = subprocess.run(
                ["ip", "-n", node.netns, "-o", "link", "show", "dev", e.nic], capture_output=True, text=True, check=True
            ).stdout
            assert e.mac in link and "state UP" in link
            assert ovs.vsctl("port-to-br", e.ovs_port).strip() == e.bridge
            assert ovs.vsctl("get", "port", e.ovs_port, "tag").strip() == str(first.quarantine_vlan)
    leaves = {e.bridge for n in first.nodes for e in n.ethernet}
    assert leaves == set(first.leaf_bridges) == {f"{first.prefix}-leaf01", f"{first.prefix}-leaf02"}
    for leaf in first.leaf_bridges:
        ports = ovs.vsctl("list-ports", leaf).split()
        up = next(p for p in ports if p.endswith("-up"))
        assert ovs.vsctl("get", "port", up, "vlan_mode").strip() == "trunk"
        assert ovs.vsctl("get", "interface", up, "type").strip() == "patch"


def test_tenant_vlan_crosses_leaves_and_quarantine_does_not_reach_it(lab: Lab, first: LabStatus) -> None:
    a01, a02, a05 = (first.node(n) for n in ("gpu-a01", "gpu-a02", "gpu-a05"))
    assert a01 and a02 and a05 and a01.ethernet[0].bridge != a05.ethernet[0].bridge
    ovs = lab.ovs()
    try:
        for n in (a01, a05):
            ovs.vsctl("set", "port", n.ethernet[0].ovs_port, "tag=2001", "protected=false")  # a tenant VLAN of the pool
        ip05 = a05.ethernet[0].ip.split("/")[0]
        ok = _ping(a01.netns, ip05)
        blocked = _ping(a02.netns, ip05)  # a02 stays quarantined (VLAN 4000, protected)
        a06 = first.node("gpu-a06")
        assert a06 is not None and a06.ethernet[0].bridge != a02.ethernet[0].bridge
        quarantined_pair = _ping(a02.netns, a06.ethernet[0].ip.split("/")[0])  # both quarantined, across leaves
    finally:
        for n in (a01, a05):
            ovs.vsctl("set", "port", n.ethernet[0].ovs_port, f"tag={first.quarantine_vlan}", "protected=true")
    assert ok.returncode == 0, ok.stdout
    assert blocked.returncode != 0, blocked.stdout
    assert quarantined_pair.returncode != 0, quarantined_pair.stdout


def _ping(netns: str, ip: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", netns, "ping", "-c", "3", "-i", "0.2", "-W", "2", ip],
        capture_output=True,
        text=True,
        check=False,
    )


def test_up_again_is_a_noop(lab: Lab, first: LabStatus) -> None:
    again = lab.up(nodes=6, hcas_per_node=2, eth_ports_per_node=1)
    assert (again.ibsim_pid, again.opensm_pid, again.ovs_pids) == (first.ibsim_pid, first.opensm_pid, first.ovs_pids)
    assert again.to_dict() == first.to_dict()


def test_cli_status_json(home: Path, first: LabStatus) -> None:
    r = CliRunner().invoke(lab_group.to_typer(), ["status", "--json"], env={**os.environ, "GPUFABRIC_HOME": str(home)})
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert (data["opensm_pid"], data["ibsim_sockname"], data["running"]) == (
        first.opensm_pid,
        first.ibsim_sockname,
        True,
    )


def test_down_leaves_nothing_behind(lab: Lab, first: LabStatus, home: Path) -> None:
    lab.down()
    pids = [first.ibsim_pid, first.opensm_pid, *(p for _, p in first.ovs_pids)]
    assert all(p for p in pids)
    assert not any(pid_alive(p) for p in pids)
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert first.prefix not in netns
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert first.prefix not in links
    procs = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert str(home) not in procs
    assert not list((home / "lab").rglob("sys-*"))
    st = lab.status()
    assert not st.running and st.nodes == ()


def test_up_with_topology_file(tmp_path: Path) -> None:
    net = tmp_path / "two.net"
    net.write_text(generate_netfile(2, 1))
    lab = Lab(tmp_path / "home")
    try:
        st = lab.up(topology=net, eth_ports_per_node=2)
        assert st.running, st.problems
        assert [n.name for n in st.nodes] == ["gpu-a01", "gpu-a02"]
        assert st.sm_node == "sm-01 mlx5_0"
        assert [len(n.ethernet) for n in st.nodes] == [2, 2]
        assert [e.nic for e in st.nodes[1].ethernet] == ["eth0", "eth1"]
        assert re.fullmatch(r"gf[0-9a-f]{5}", st.prefix)
    finally:
        lab.down()
    assert not lab.status().running
