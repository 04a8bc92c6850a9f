"""Conformance of the parsers to real device outputs (tests/fixtures/real/, see its README):
each output was copied from a public repository of a real device or site, and its expected
reading was written by hand into the manifest beside it.

* ibnetdiscover: whole fabrics (NVIDIA Selene DGX SuperPOD compute and storage, a 400-switch
  site saved with PuTTY, a cluster whose hosts never set their descriptions, vendor docs).
* ethernet/nxos, ethernet/eos, ethernet/os10: running configs (NX-OS 6.2 - 9.3, EOS 4.19 - 4.26,
  OS10 10.4; MLAG leaves and Nexus 9000v port-channels from batfish/lab-validation's labs);
  ethernet/junos: batfish's set-style Junos test configs (ELS and non-ELS, a routed ae) and two
  whole Junos 25.4 captures; ethernet/sonic: a Force10-S6000 ToR's and four Enterprise SONiC
  3.1.2 switches' config_db.json; ethernet/nvue: Cumulus VX 5.x startup.yaml (bonds, MLAG,
  peerlink). An ``expected.members`` map pins every aggregate member
  read, each carrying its aggregate's VLANs.
* dpu-flows: ``ovs-appctl dpctl/dump-flows`` of Kube-OVN on three NICs and of
  sriov-network-operator's ConnectX-6 Dx (OVN-Kubernetes vDPA; ovs-cni); the two taken without
  ``-m`` are read as refusals.
* nvidia-smi-q: ``nvidia-smi -q`` of three HGX H100 8-GPU (drivers 535, 565), an HGX A100 (4 GPUs),
  two H100 NVL, ten A40 and eight RTX 6000 Ada.

The ``test_regression_*`` cases name the failure classes of issue 21 on one real output each;
they fail on aa4b99f (the dump-flows one on 6b8ac5e).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import Guid, VlanId
from gpufabric.fabrics.dpu.readers.offload import parse_dump_flows
from gpufabric.fabrics.ethernet.drivers.ssh.dialects import load_dialect
from gpufabric.fabrics.ethernet.readers.running_config import parse_ios_bonds, parse_running_config, parse_vlan_list
from gpufabric.fabrics.ethernet.state import PortMode, aggregate_key
from gpufabric.fabrics.infiniband.inventory.match import match_ca_ports, match_fabric
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import IbTopology, NodeKind, parse_ibnetdiscover
from gpufabric.fabrics.nvlink.readers.smi import parse_pdsh, parse_smi_q, smi_domain

from support.real_outputs import REAL, Manifest, all_manifests, manifest, manifests, real_output, redistributable

IB = manifests("ibnetdiscover")
ETH = (
    manifests("ethernet/nxos") + manifests("ethernet/eos") + manifests("ethernet/os10") + manifests("ethernet/junos")
    + manifests("ethernet/sonic") + manifests("ethernet/nvue")
)  # fmt: skip
FLOWS = manifests("dpu-flows")
SMI = manifests("nvidia-smi-q")
PDSH = manifests("nvidia-smi-pdsh")


def test_every_redistributable_output_is_committed_beside_its_manifest_with_its_licence() -> None:
    """CI runs on a fresh clone: the outputs whose licence permits it are in the repository, so
    their cases run there instead of skipping (the rest need ../shared/real-outputs)."""
    corpus = all_manifests()
    kept = [m for m in corpus if redistributable(m)]
    assert len(kept) >= 60 and len(corpus) - len(kept) >= 1  # 60 committed, the GPL/unlicensed ones not
    for m in kept:
        p = REAL / m.parser / m.file
        assert p.is_file(), f"{m.id}: licence {m.doc['license']} permits it, so it is committed (.gitignore)"
        assert (REAL / "LICENSES" / (str(m.doc["repo"]).replace("/", "__") + ".txt")).is_file(), m.doc["repo"]


def test_the_corpus_has_five_real_outputs_per_parser_where_they_exist() -> None:
    assert len(IB) >= 5 and len(manifests("ethernet/nxos")) >= 5 and len(manifests("ethernet/eos")) >= 5
    assert len(manifests("ethernet/sonic")) >= 5 and len(manifests("ethernet/junos")) >= 5
    assert len(FLOWS) >= 5  # Kube-OVN's three captures, sriov-network-operator's two
    assert len(SMI) >= 5  # thamada/nvidia-smi's and gpud's multi-GPU -q captures
    for m in IB + ETH + FLOWS + SMI:
        assert len(m.doc["commit"]) == 40 and "/" in m.doc["repo"] and m.doc["device"], m.id


# --------------------------------------------------------------------------- ibnetdiscover
@cache
def _topology(file: str) -> IbTopology:  # the SuperPOD takes seconds: parsed once per session
    return parse_ibnetdiscover(real_output(manifest("ibnetdiscover", file)))


@pytest.mark.parametrize("m", IB, ids=[m.file for m in IB])
def test_ibnetdiscover_reads_whole_real_fabrics(m: Manifest) -> None:
    exp = m.expected
    topo = _topology(m.file)
    assert (len(topo.switches()), len(topo.cas())) == (exp["switches"], exp["cas"])
    got = match_fabric(topo)
    assert sum(1 for c in got.cas if c.kind is NodeKind.CA and not c.skipped) == exp["matched_cas"]
    assert len(got.ports) == exp["ports"]
    assert len({p.node for p in got.ports}) == exp["hosts"]
    assert got.counts() == {**({"matched": exp["matched_cas"]} if exp["matched_cas"] else {}), **exp["skipped"]}
    by_guid = {p.node_guid: p for p in got.ports}
    for e in exp["entries"]:
        p = by_guid[Guid.parse(e["node_guid"])]
        assert (p.node, p.device, p.switch_guid, p.switch_port) == (
            e["host"],
            e["device"],
            Guid.parse(e["switch_guid"]),
            e["switch_port"],
        ), e
        assert p.port_num == e.get("port_num", 1)
    skips = {c.node_guid: c.skip for c in got.cas}
    for s in exp["skips"]:
        assert skips[Guid.parse(s["node_guid"])] == s["skip"]


def test_regression_superpod_import_is_not_refused_for_its_aggregation_nodes() -> None:
    """aa4b99f: every Quantum switch's SHARP aggregation node, and every "host HCA-N", was a
    CA that "does not match": ib_ports_from_topology refused the whole Selene fabric and the
    lenient reader matched only the mlx5 descriptions."""
    topo = _topology("selene-compute.topo")
    ports, skipped = match_ca_ports(topo)
    assert len(ports) == 3675 and len(skipped) == 666
    assert {s.description for s in skipped} == {"Mellanox Technologies Aggregation Node"}
    assert sum(1 for p in ports if p.device.startswith("HCA-")) == 5  # selene-swift, -login, -ufm-c


def test_regression_putty_capture_with_upper_case_hosts_is_read() -> None:
    """aa4b99f: the tab-less saved capture was refused at line 13; its upper-case host names
    ("SAT111092710053 ibp11s0f0") were not host names."""
    topo = _topology("ufm-ndt-director-putty.topo")
    ports, _ = match_ca_ports(topo)
    assert {p.device for p in ports if p.node == "sat111092710053"} == {
        f"ibp{b}s0f0" for b in (11, 21, 75, 85, 139, 149, 203, 213)
    }


# --------------------------------------------------------------------------- ethernet
def _read(m: Manifest) -> dict[str, Any]:
    st = parse_running_config(load_dialect(m.doc["dialect"]), real_output(m), switch="sw")
    return {p.port: p for p in st.ports}


@pytest.mark.parametrize("m", ETH, ids=[m.id.removeprefix("ethernet/") for m in ETH])
def test_running_configs_are_read_as_the_device_applies_them(m: Manifest) -> None:
    exp = m.expected
    ports = _read(m)
    assert len(ports) == exp["ports"]
    for name, e in exp["entries"].items():
        p = ports[name]
        assert p.mode is PortMode(e["mode"]), (name, p)
        if p.mode is not PortMode.SHUTDOWN:
            assert (p.vlan.value if p.vlan else None) == e["vlan"], (name, p)
            want = set(parse_vlan_list(str(e["vlans"]))) if "vlans" in e else {e["vlan"]}
            assert p.vlans() == want, name
    for name in exp["absent"]:
        assert name not in ports, (name, ports.get(name))
    bonds = {b.port: b for b in parse_ios_bonds(real_output(m))}
    assert {k: {"bond": b.bond, "lacp_mode": b.lacp_mode} for k, b in bonds.items() if k in exp["bonds"]} == exp[
        "bonds"
    ]
    assert len(bonds) >= len(exp["bonds"])
    members = {k: ports[k].bond for k in exp["bonds"] if k in ports}  # a member read as a port: with its channel
    assert {k: aggregate_key(v) for k, v in members.items()} == {
        k: aggregate_key(exp["bonds"][k]["bond"]) for k in members
    }
    if "members" in exp:  # every aggregate member the config has (Junos ae, SONiC PortChannel, NVUE bond)
        assert {p.port: p.bond for p in ports.values() if p.bond} == exp["members"]
        for member, agg in exp["members"].items():  # a member carries its aggregate's VLANs, none of its own
            assert (ports[member].mode, ports[member].vlans()) == (ports[agg].mode, ports[agg].vlans()), member


def test_regression_nxos_ports_without_a_switchport_line_are_read_with_the_defaults() -> None:
    """aa4b99f: the N9Kv prints "switchport access vlan 20" alone (L2 is its default) and
    nothing at all on an unconfigured port: both read as no port (l2_requires_switchport)."""
    ports = _read(manifest("ethernet/nxos", "cisco-labs-dc1-leaf2.txt"))
    assert ports["Ethernet1/4"].mode is PortMode.ACCESS and ports["Ethernet1/4"].vlan == VlanId(20)
    assert ports["Ethernet1/3"].vlan == VlanId(1) and "Ethernet1/1" not in ports


def test_regression_eos_port_channel_members_carry_the_port_channels_vlans() -> None:
    """aa4b99f: Ethernet1/2 of the bonded vEOS (only "channel-group 1 mode active") read as
    access VLAN 1 while its traffic is Port-Channel1's trunk 1-4000."""
    ports = _read(manifest("ethernet/eos", "avd-clab-SRV-POD03.txt"))
    for member in ("Ethernet1", "Ethernet2"):
        assert ports[member].mode is PortMode.TRUNK and ports[member].vlans() == set(range(1, 4001))


def test_regression_nxos_fex_fabric_members_are_not_access_vlan_1() -> None:
    """aa4b99f: 38 FEX uplinks ("switchport mode fex-fabric" + channel-group) read as access
    VLAN 1 on the N7K."""
    ports = _read(manifest("ethernet/nxos", "ciscoconfparse-sample_01.nxos"))
    assert "Ethernet2/1" not in ports and len(ports) == 5


def test_regression_junos_member_naming_a_vlan_without_an_id_does_not_fail_the_read() -> None:
    """87d88a6: "vlan members NOTSET" (a VLAN defined with no vlan-id) made the whole Junos read
    fail with "invalid vlan list"; the port is in no VLAN and the other ports are still read."""
    ports = _read(manifest("ethernet/junos", "batfish-juniper-vlan-access.set"))
    assert {n: p.vlan for n, p in ports.items()} == {
        "et-0/0/2": VlanId(2),
        "et-0/0/3": VlanId(2),
        "et-0/0/4": VlanId(1),
    }


def test_regression_nvue_startup_yaml_is_read() -> None:
    """The NVUE parser took only JSON; NVUE shows its configuration as YAML by default and saves it
    as /etc/nvue.d/startup.yaml (Cumulus Linux 5.4.0 VX backup, two EVPN-MH bonds): read, each
    bond member with its bond's VLAN."""
    ports = _read(manifest("ethernet/nvue", "cumulus-ansible-evpn-l2-dci-leaf01.yaml"))
    assert {n: (p.mode, p.vlan, p.bond) for n, p in ports.items() if n.startswith("swp")} == {
        "swp3": (PortMode.ACCESS, VlanId(10), "bond1"), "swp4": (PortMode.ACCESS, VlanId(20), "bond2")}  # fmt: skip


def test_regression_junos_non_els_native_vlan_under_the_family_is_read() -> None:
    """87d88a6: "unit 0 family ethernet-switching native-vlan-id 666" (non-ELS) was ignored, so the
    trunk's untagged VLAN read as none."""
    port = _read(manifest("ethernet/junos", "batfish-juniper_vlan.set"))["xe-0/0/0"]
    assert port.vlan == VlanId(666) and port.vlans() == {30, 40, 50, 666}


# --------------------------------------------------------------------------- dpu flows
@pytest.mark.parametrize("m", FLOWS, ids=[m.file for m in FLOWS])
def test_dump_flows_of_real_dpus(m: Manifest) -> None:
    if "refused" in m.expected:  # a dump that cannot say where its flows run
        with pytest.raises(ValidationError, match=re.escape(m.expected["refused"])):
            parse_dump_flows(real_output(m))
        return
    flows = parse_dump_flows(real_output(m))
    exp = m.expected["flows"]
    assert len(flows) == len(exp)
    for f, e in zip(flows, exp, strict=True):
        assert (f.in_port, list(f.out_ports), f.path, f.packets, f.bytes) == (
            e["in_port"],
            e["out_ports"],
            e["path"],
            e["packets"],
            e["bytes"],
        )
        if "ufid" in e:
            assert f.ufid == e["ufid"]


def test_regression_representors_named_after_container_ids_are_output_ports() -> None:
    """aa4b99f: "actions:54235e5753b8_h" gave no output port (names had to start with a letter)."""
    flows = parse_dump_flows(real_output(manifest("dpu-flows", "kubeovn-mellanox-cx5.txt")))
    assert [f.out_ports for f in flows] == [("54235e5753b8_h",), ("5b45c61b307e_h",)]


def test_regression_dump_without_m_is_refused_not_read_as_datapath_flows() -> None:
    """6b8ac5e: a dump taken without -m prints no offloaded:/dp: attribute, and every line of
    the ConnectX-6 Dx's "type=offloaded" dump (all four flows in hardware) was read as a
    datapath flow: the offload report would show a fully offloaded node as none offloaded."""
    text = real_output(manifest("dpu-flows", "sriovop-ovs-hw-offload-cx6dx.txt"))
    with pytest.raises(ValidationError, match=r"dump-flows line 1: offloaded/dp") as err:
        parse_dump_flows(text)
    assert "-m" in str(err.value)


# --------------------------------------------------------------------------- nvidia-smi -q
@pytest.mark.parametrize("m", SMI, ids=[m.file for m in SMI])
def test_smi_q_of_real_nodes_maps_module_ids_to_pci_bus_ids(m: Manifest) -> None:
    exp = m.expected
    gpus = parse_smi_q(real_output(m))
    assert [(g.pci_bus_id, g.module_id) for g in gpus] == [(e["bus"], e["module_id"]) for e in exp["gpus"]]
    assert {g.pci_bus_id: g.uuid for g in gpus if g.pci_bus_id in exp["uuids"]} == exp["uuids"]
    fab = exp["fabric"]
    assert {(g.state, g.status, g.clique_id, g.cluster_uuid) for g in gpus} == {
        (fab["state"], fab["status"], str(fab["clique_id"]), fab["cluster_uuid"])
    }


@pytest.mark.parametrize("m", SMI, ids=[m.file for m in SMI])
def test_real_single_node_outputs_are_their_own_board_nvlink_domain(m: Manifest) -> None:
    """NET02-02: an HGX board (driver 565's CliqueId 0 and all-zero ClusterUUID, driver 535's
    Fabric without the lines) and PCIe GPUs (N/A) report no multi-node NVLink domain: the node's
    domain is its board, named after the node."""
    d = smi_domain("gpu-a01", real_output(m))
    assert m.expected["nvlink_domain"] == "board"
    assert d.to_dict() == {"id": "board:gpu-a01", "cluster_uuid": None, "clique_id": None, "source": "board"}


@pytest.mark.parametrize("m", PDSH, ids=[m.file for m in PDSH])
def test_real_pdsh_fabric_lines_give_each_node_its_multi_node_domain(m: Manifest) -> None:
    """NET02-02: topograph's pdsh lines of ``nvidia-smi -q | grep`` on multi-node NVLink nodes:
    each host's ClusterUUID and CliqueId, and nodes sharing both share one domain."""
    per_host = parse_pdsh(real_output(m))
    assert list(per_host) == m.expected["hosts"]
    got = {h: smi_domain(h, text) for h, text in per_host.items()}
    assert {h: {"cluster_uuid": d.cluster_uuid, "clique_id": d.clique_id} for h, d in got.items()} == m.expected["domains"]
    assert all(d.source == "nvidia-smi" for d in got.values())
    together: dict[str, list[str]] = {}
    for h, d in sorted(got.items()):
        together.setdefault(d.id, []).append(h)
    assert sorted(together.values()) == m.expected["together"]


def test_real_hgx_h100_module_ids_under_platform_info_are_read() -> None:
    """Driver 565 prints "Module Id" (lower-case d) under "Platform Info", not "Module ID" at
    the top: the HGX H100 board still yields module ids 1-8, one per GPU, out of PCI order."""
    gpus = parse_smi_q(real_output(manifest("nvidia-smi-q", "thamada-hgx-h100x8-q.txt")))
    assert sorted(g.module_id or 0 for g in gpus) == list(range(1, 9))
    assert [g.module_id for g in gpus][:3] == [2, 4, 1]
