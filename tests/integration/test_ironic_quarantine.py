"""Ironic's networks are gpufabric's quarantine, on the lab (issue 34 item 3): a real Ironic 39
(``neutron`` network interface, a cleaning network), a real Neutron 29 with the gpufabric driver
(``ironic_networks`` = Ironic's cleaning network, ``ironic_url`` = Ironic, NO node_map: the driver
finds the node by the Ironic UUID ``inventory import --from ironic`` stored) and a real
``gpufabric serve`` on the lab (OVS + ibsim/OpenSM). The fabrics are read without gpufabric:
the switch port's VLAN by ovs-vsctl, the HCA's PKey table by SMP.

Flow: the lab's nodes enrolled in Ironic by the user's client (``openstack baremetal node create``
/ ``port create`` with their switch ports); ``gpufabric inventory import --from ironic``; n1 joins
project A's Ethernet and IB networks through Neutron ports with ``binding:host_id`` = its Ironic
UUID (VLAN + PKey); ``openstack baremetal node manage`` / ``provide``: Ironic's cleaning binds
n1's ports on the cleaning network, and gpufabric moves n1 to quarantine on EVERY fabric (VLAN
4000 and out of A's partition, although Ironic only bound Ethernet ports); while Ironic cleans,
project B's bind of n1 is refused (one line naming the node and ``clean wait``) with the fabrics
unchanged; n2, deployed by Ironic with no network through gpufabric, is reported by the import.
InfiniBand through ESI (item 4): the lessee's ``openstack esi node network attach --network
<ib-net> n2`` (python-esiclient) puts n2's HCA in the PKey the segmentation id maps to (SMP) and
changes no switch port (OVSDB before/after); the Ethernet network's attach sets the VLAN and
changes no PKey table (SMP before/after). Each node's HCA is an Ironic port on the IB physnet
with its port GUID as ``local_link_connection.port_id``, not PXE-enabled (else Ironic puts it on
its cleaning network, whose Ethernet segment it is not a port of: that bind is refused and
cleaning never ends)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from .gf_env import GpufabricServe, lab_up
from .ironic_env import CLIENT_VENV, Ironic, ensure_venvs
from .neutron_env import ETH_PHYSNET, IB_PHYSNET, Neutron, ensure_venv, free_port
from .test_neutron_real import diag, eth_lli, ib_lli, member_pkeys
from e2e.conftest import LabEnv

pytestmark = [pytest.mark.integration, pytest.mark.root]

IRONIC_PROJECT = "fake_project_id"  # the project Ironic creates its ports in under noauth
CLEANING = "ironic-cleaning"
QUARANTINE_VLAN = 4000
A_VLAN, B_VLAN, A_IBSEG = 2700, 2701, 3040
A_PKEY = 0x0A00 + (A_IBSEG - 3000)
UUIDS = {"n1": "7a1c3a52-8f43-4b9e-9a63-0b5c2a9d0001", "n2": "7a1c3a52-8f43-4b9e-9a63-0b5c2a9d0002"}


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabEnv]:
    yield from lab_up(tmp_path_factory, 2)


def enroll(lab: LabEnv) -> list[str]:
    """The client commands enrolling the lab's nodes (named as gpufabric names them) with their
    NIC's switch port (bridge + OVS port, as LLDP inspection would fill it) and MAC."""
    cmds = []
    for i, n in enumerate(lab.status["nodes"][:2]):
        uuid = list(UUIDS.values())[i]
        e, guid = n["ethernet"][0], n["ib"][0]["port_guid"]
        cmds += [f"baremetal node create --driver fake-hardware --name {n['name']} --uuid {uuid} --network-interface neutron",
                 f"baremetal port create {e['mac']} --node {uuid} --extra nic={e['nic']} --physical-network {ETH_PHYSNET} "
                 f"--local-link-connection switch_id=0c:00:00:00:00:0{i + 1} --local-link-connection port_id={e['ovs_port']} "
                 f"--local-link-connection switch_info={e['bridge']}",
                 # the HCA: its port GUID as the link's port (what the driver matches on the IB physnet); not
                # PXE-enabled, so Ironic puts it on no provisioning/cleaning network (add_all_ports = false)
                 f"baremetal port create 52:54:00:1b:00:0{i + 1} --node {uuid} --extra nic=ib0 --physical-network {IB_PHYSNET} --pxe-enabled False "
                 f"--local-link-connection switch_id=0c:00:00:00:01:0{i + 1} --local-link-connection port_id={guid} "
                 "--local-link-connection switch_info=ib-fabric"]  # fmt: skip
    return cmds


@pytest.fixture(scope="module")
def stack(lab: LabEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Ironic, Neutron, GpufabricServe]]:
    d = tmp_path_factory.mktemp("ironic-quarantine")
    ensure_venvs()
    ensure_venv()
    with GpufabricServe(lab, d) as gf:
        neutron_port = free_port()
        ironic = Ironic(d / "ironic", neutron_url=f"http://127.0.0.1:{neutron_port}", network_interface="neutron",
                        automated_clean=True, deploy_interfaces="fake,direct",
                        networks={"cleaning_network": CLEANING, "provisioning_network": CLEANING})  # fmt: skip
        neutron: Neutron | None = None
        try:
            t = time.monotonic()
            ironic.start()
            p = ironic.session(*enroll(lab))
            assert {n["name"] for n in ironic.get("/v1/nodes")["nodes"]} == {
                n["name"] for n in lab.status["nodes"][:2]
            }, p.stderr
            print(f"ironic up and enrolled in {time.monotonic() - t:.1f}s")
            neutron = Neutron(d / "neutron", gf.url, gf.token_file, bind_timeout=120, port=neutron_port,
                              extra_ml2=f"ironic_networks = {CLEANING}\nironic_url = {ironic.url}\n")  # fmt: skip
            neutron.start()
            neutron.create_network(IRONIC_PROJECT, CLEANING, ETH_PHYSNET, QUARANTINE_VLAN)
            yield ironic, neutron, gf
        finally:
            ironic.stop()
            if neutron is not None:
                neutron.stop()


def gf_import(lab: LabEnv, ironic: Ironic) -> dict[str, Any]:
    p = lab.gf("inventory", "import", "--from", "ironic", "--json", extra_env={"GPUFABRIC_IRONIC_URL": ironic.url})
    return json.loads(p.stdout)  # type: ignore[no-any-return]


def test_cleaning_is_quarantine_on_every_fabric(lab: LabEnv, stack: tuple[Ironic, Neutron, GpufabricServe]) -> None:
    ironic, neutron, gf = stack
    n1, n2 = (n["name"] for n in lab.status["nodes"][:2])
    doc = gf_import(lab, ironic)
    assert doc["identities"] == {n1: UUIDS["n1"], n2: UUIDS["n2"]}, doc
    # the HCAs' Ironic ports are reported, not imported (HCAs come from ibnetdiscover)
    assert sorted(u["port_id"] for u in doc["unmatched"]) == sorted(lab.guids(n1) + lab.guids(n2)), doc["unmatched"]
    assert [x["name"] for x in gf.api("GET", f"/nodes?host_id={UUIDS['n1']}")["items"]] == [n1]

    # a tenant: project A's Ethernet and IB networks, n1's ports bound with its Ironic UUID as host (no node_map)
    a_eth = neutron.create_network("proj-a", "a-eth", ETH_PHYSNET, A_VLAN)
    a_ib = neutron.create_network("proj-a", "a-ib", IB_PHYSNET, A_IBSEG)
    for net, lli in ((a_eth, eth_lli(lab, n1)), (a_ib, ib_lli(lab, n1))):
        got = neutron.create_port("proj-a", net["id"], UUIDS["n1"], lli, "n1-" + net["name"])
        assert (got["status"], got["binding:vif_details"].get("gpufabric_node")) == ("ACTIVE", n1), neutron.errors()
    assert lab.ovs_tag(lab.eth_ports(n1)[0]) == A_VLAN and member_pkeys(lab, n1) == {A_PKEY}, diag(lab, n1)

    # the operator's own commands: Ironic cleans n1 and binds its ports on the cleaning network
    clean = neutron.ok("GET", f"/networks?name={CLEANING}")["networks"][0]
    t = time.monotonic()
    ironic.session(f"baremetal node set {n1} --deploy-interface direct", f"baremetal node manage {n1}")
    assert ironic.wait_state(n1, "manageable")["provision_state"] == "manageable"
    ironic.session(f"baremetal node provide {n1}")
    node = ironic.wait_state(n1, "clean wait", 180, also=("clean failed",))
    assert node["provision_state"] == "clean wait", (node["last_error"], neutron.errors()[-5:])
    ports = [p for p in neutron.ok("GET", "/ports")["ports"] if p["network_id"] == clean["id"]]
    got = [(p["binding:host_id"], p["status"], p["binding:vif_details"].get("gpufabric_node"),
            p["binding:vif_details"].get("gpufabric_quarantine")) for p in ports]  # fmt: skip
    assert got == [(UUIDS["n1"], "ACTIVE", n1, True)], neutron.errors()[-5:]
    print(f"provide to clean wait, n1 in quarantine: {time.monotonic() - t:.1f}s")
    # every fabric, read from the fabrics: Ethernet on the quarantine VLAN, the HCA out of A's partition
    assert lab.ovs_tag(lab.eth_ports(n1)[0]) == QUARANTINE_VLAN, diag(lab, n1)
    assert member_pkeys(lab, n1) == set()
    assert gf.api("GET", f"/nodes/{n1}")["tenant"] == "quarantine"
    assert gf.api("GET", "/networks?limit=100", admin=True)["total"] == 2  # the cleaning network is none of gpufabric's

    # while Ironic cleans: project B's join is refused, one line naming the node and the state; fabrics unchanged
    b_eth = neutron.create_network("proj-b", "b-eth", ETH_PHYSNET, B_VLAN)
    refused = neutron.create_port("proj-b", b_eth["id"], UUIDS["n1"], eth_lli(lab, n1), "n1-b")
    assert refused["binding:vif_type"] == "binding_failed", refused
    line = f"node {n1} (Ironic node {UUIDS['n1']}) is in Ironic provision_state 'clean wait'"
    assert any(line in x for x in neutron.errors()), neutron.errors()[-3:]
    assert lab.ovs_tag(lab.eth_ports(n1)[0]) == QUARANTINE_VLAN and member_pkeys(lab, n1) == set()
    ironic.session(f"baremetal node abort {n1}")
    assert ironic.wait_state(n1, "clean failed", 60)["provision_state"] == "clean failed"


def test_a_node_ironic_deployed_in_quarantine_is_reported(
    lab: LabEnv, stack: tuple[Ironic, Neutron, GpufabricServe]
) -> None:
    ironic, _, _ = stack
    n2 = lab.status["nodes"][1]["name"]
    ironic.session(f"baremetal node manage {n2}")  # fake deploy: its cleaning and deploy bind no network
    assert ironic.wait_state(n2, "manageable")["provision_state"] == "manageable"
    ironic.session(f"baremetal node provide {n2}")
    assert ironic.wait_state(n2, "available", 60)["provision_state"] == "available"
    ironic.session(f"baremetal node deploy {n2}")
    node = ironic.wait_state(n2, "active", 60, also=("deploy failed",))
    assert node["provision_state"] == "active", node["last_error"]
    doc = gf_import(lab, ironic)
    assert [(x["node"], x["provision_state"], x["gpufabric"]) for x in doc["disagree"]] == [(n2, "active", "available")]
    assert any(f"{n2}: Ironic deployed it" in m for m in doc["messages"])


LESSEE = "fake_project_id"  # the project a noauth client's Neutron ports are created in: the lessee here
L_VLAN, L_IBSEG = 2702, 3041
L_PKEY = 0x0A00 + (L_IBSEG - 3000)


def esi(ironic: Ironic, neutron: Neutron, *args: str) -> subprocess.CompletedProcess[str]:
    """The lessee's ``openstack ARGS`` (python-esiclient 1.3.0 in .venv-esiclient), noauth: Ironic
    at --os-endpoint, Neutron at its endpoint override (OS_NETWORK_ENDPOINT_OVERRIDE)."""
    cmd = [str(CLIENT_VENV / "bin" / "openstack"), "--os-auth-type", "none", "--os-endpoint", ironic.url,
           "--os-baremetal-api-version", "1.88", *args]  # fmt: skip
    env = {
        **os.environ,
        "OS_NETWORK_ENDPOINT_OVERRIDE": neutron.url.removesuffix("/v2.0") + "/",
    }  # its version document
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def test_an_ib_network_through_esi_touches_no_switch_and_an_ethernet_one_no_sm(
    lab: LabEnv, stack: tuple[Ironic, Neutron, GpufabricServe]
) -> None:
    """Item 4 of issue 34: ``openstack esi node network attach --network <ib-net> NODE`` puts the
    node's HCA in the partition the segmentation id maps to (SMP) and changes no switch port
    (OVSDB before/after); the Ethernet network's attach puts the VLAN on the node's switch port
    and changes no PKey table (SMP before/after)."""
    ironic, neutron, gf = stack
    n1, n2 = (n["name"] for n in lab.status["nodes"][:2])
    assert ironic.get(f"/v1/nodes/{n2}")["provision_state"] == "active"  # deployed by the test before
    neutron.create_network(LESSEE, "lessee-ib", IB_PHYSNET, L_IBSEG)
    neutron.create_network(LESSEE, "lessee-eth", ETH_PHYSNET, L_VLAN)

    def tags() -> dict[str, int | None]:
        return {p: lab.ovs_tag(p) for n in (n1, n2) for p in lab.eth_ports(n)}

    switch_before, sm_before = tags(), lab.pkey_tables()
    t = time.monotonic()
    r = esi(ironic, neutron, "esi", "node", "network", "attach", "--network", "lessee-ib", n2, "-f", "json")
    assert r.returncode == 0, (r.stdout[-1500:], r.stderr[-3000:], neutron.errors()[-3:])
    print(f"esi node network attach (IB): {time.monotonic() - t:.1f}s")
    assert member_pkeys(lab, n2) == {L_PKEY}, neutron.errors()[-3:]
    assert tags() == switch_before, "an IB network's attach touched a switch port"
    sm_after_ib = lab.pkey_tables()
    assert {g: t for g, t in sm_after_ib.items() if g not in lab.guids(n2)} == {
        g: t for g, t in sm_before.items() if g not in lab.guids(n2)
    }  # only n2's HCA changed
    r = esi(ironic, neutron, "esi", "node", "network", "attach", "--network", "lessee-eth", n2, "-f", "json")
    assert r.returncode == 0, (r.stdout[-1500:], r.stderr[-3000:], neutron.errors()[-3:])
    assert lab.ovs_tag(lab.eth_ports(n2)[0]) == L_VLAN, diag(lab, n2)
    assert lab.pkey_tables() == sm_after_ib, "an Ethernet network's attach touched a PKey table"
    assert gf.api("GET", f"/nodes/{n2}")["tenant"] != "quarantine"  # the lessee's project's tenant
    # what ESI attached, as Ironic and Neutron hold it (esi node network list also asks Neutron for
    # floating IPs: this Neutron runs no L3 plugin, so it answers 404 to that)
    vifs = {v["id"] for v in ironic.get(f"/v1/nodes/{n2}/vifs")["vifs"]}
    ports = {p["name"]: p for p in neutron.ok("GET", "/ports")["ports"] if p["id"] in vifs}
    assert {n: (p["status"], p["binding:host_id"]) for n, p in ports.items()} == {
        f"esi-{n2}-lessee-ib": ("ACTIVE", UUIDS["n2"]),
        f"esi-{n2}-lessee-eth": ("ACTIVE", UUIDS["n2"]),
    }, ports
