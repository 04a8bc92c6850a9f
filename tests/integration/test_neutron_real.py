"""A real Neutron 29 with the gpufabric ML2 driver, driving a real ``gpufabric serve`` (API v1,
bearer token) on the lab (ibsim + OpenSM + OVS + netns). What the switches hold is read
without gpufabric: the switch port's VLAN with ovs-vsctl (OVSDB), the HCA's PKey table by
SMP (smpquery), reachability by ping between the nodes' namespaces.

Flow, as ESI does it: Neutron networks (one Ethernet on ``physnet1``, one InfiniBand on
``ib``) per project; Ironic-style bare-metal ports with ``local_link_information`` bind
through gpufabric's move workflow; unbinding sends the node to quarantine; a second
project's node on its own network stays isolated on both fabrics.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from .gf_env import GpufabricServe, lab_up
from .neutron_env import ETH_PHYSNET, IB_PHYSNET, Neutron, ensure_venv
from e2e.conftest import LabEnv

pytestmark = [pytest.mark.integration, pytest.mark.root]

LAB_NODES = 3
QUARANTINE_VLAN = 4000
A_VLAN, B_VLAN, A_IBSEG = 2500, 2501, 3020
A_PKEY = 0x0A00 + (A_IBSEG - 3000)  # gpufabric's default offset mapping: seg 3000 -> PKey 0x0a00


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabEnv]:
    yield from lab_up(tmp_path_factory, LAB_NODES)


@pytest.fixture(scope="module")
def neutron(lab: LabEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Neutron]:
    d = tmp_path_factory.mktemp("neutron")
    t = time.monotonic()
    ensure_venv()
    print(f"neutron venv ready in {time.monotonic() - t:.1f}s")
    with GpufabricServe(lab, d) as gf:
        n = Neutron(d / "etc", gf.url, gf.token_file, bind_timeout=240)
        try:
            t = time.monotonic()
            n.start()
            print(f"neutron API up in {time.monotonic() - t:.1f}s")
            yield n
        finally:
            n.stop()


def eth_lli(lab: LabEnv, node: str) -> list[dict[str, Any]]:
    """What Ironic holds for the node's NIC (LLDP-discovered): the switch and its port."""
    e = lab.node(node)["ethernet"][0]
    return [{"switch_id": e["bridge"], "switch_info": e["bridge"], "port_id": e["ovs_port"]}]


def ib_lli(lab: LabEnv, node: str) -> list[dict[str, Any]]:
    return [{"port_id": lab.guids(node)[0]}]


def diag(lab: LabEnv, *nodes: str) -> str:
    """The nodes' switch ports as OVSDB holds them, for a failing ping."""
    out = []
    for n in nodes:
        for port in lab.eth_ports(n):
            cols = subprocess.run(["ovs-vsctl", f"--db=unix:{lab.status['ovsdb_socket']}", "--columns=name,tag,trunks,vlan_mode",
                                   "list", "port", port], capture_output=True, text=True, check=False).stdout  # fmt: skip
            out.append(f"{n}: {' '.join(cols.split())}")
    return "\n".join(out)


def member_pkeys(lab: LabEnv, node: str) -> set[int]:
    table = lab.pkey_tables()[lab.guids(node)[0]]
    return {e & 0x7FFF for e in table if e & 0x8000 and e & 0x7FFF != 0x7FFF}


def test_neutron_binds_both_fabrics_through_gpufabric(lab: LabEnv, neutron: Neutron) -> None:
    a_eth = neutron.create_network("proj-a", "a-eth", ETH_PHYSNET, A_VLAN)
    a_ib = neutron.create_network("proj-a", "a-ib", IB_PHYSNET, A_IBSEG)
    b_eth = neutron.create_network("proj-b", "b-eth", ETH_PHYSNET, B_VLAN)
    n1, n2, n3 = (n["name"] for n in lab.status["nodes"][:3])

    # Ethernet: project A's nodes n1 and n3, project B's node n2
    t = time.monotonic()
    p1 = neutron.create_port("proj-a", a_eth["id"], f"ironic-{n1}", eth_lli(lab, n1), "n1-eth")
    eth_bind_s = time.monotonic() - t
    assert (p1["status"], p1["binding:vif_type"]) == ("ACTIVE", "other"), p1
    assert lab.ovs_tag(lab.eth_ports(n1)[0]) == A_VLAN, diag(lab, n1)
    assert member_pkeys(lab, n1) == set(), "a Neutron Ethernet network must not put the node's HCA in a partition"
    p3 = neutron.create_port("proj-a", a_eth["id"], f"ironic-{n3}", eth_lli(lab, n3), "n3-eth")
    p2 = neutron.create_port("proj-b", b_eth["id"], f"ironic-{n2}", eth_lli(lab, n2), "n2-eth")
    assert p3["status"] == p2["status"] == "ACTIVE"
    assert lab.ovs_tag(lab.eth_ports(n2)[0]) == B_VLAN
    # ping matrix: same project reaches, the other project does not, in both directions
    assert lab.ping(n1, n3) and lab.ping(n3, n1), diag(lab, n1, n3)
    assert not lab.ping(n1, n2) and not lab.ping(n2, n1) and not lab.ping(n3, n2), diag(lab, n1, n2, n3)

    # InfiniBand: n1 joins project A's partition; nothing changes on its Ethernet port
    t = time.monotonic()
    p1ib = neutron.create_port("proj-a", a_ib["id"], f"ironic-{n1}", ib_lli(lab, n1), "n1-ib")
    ib_bind_s = time.monotonic() - t
    assert (p1ib["status"], p1ib["binding:vif_type"]) == ("ACTIVE", "other"), p1ib
    assert member_pkeys(lab, n1) == {A_PKEY}
    assert A_PKEY not in member_pkeys(lab, n2) | member_pkeys(lab, n3), "only n1's HCA joined the partition"
    assert lab.ovs_tag(lab.eth_ports(n1)[0]) == A_VLAN, "an IB network must not add a VLAN: " + diag(lab, n1)
    assert lab.ping(n1, n3), diag(lab, n1, n3)
    print(f"bind (Neutron -> gpufabric applied): ethernet {eth_bind_s:.2f}s, infiniband {ib_bind_s:.2f}s")

    # unbind (Ironic teardown): IB first (node stays on Ethernet), then Ethernet -> quarantine
    t = time.monotonic()
    assert neutron.unbind_port(p1ib["id"])["binding:vif_type"] == "unbound"
    assert member_pkeys(lab, n1) == set()
    assert lab.ovs_tag(lab.eth_ports(n1)[0]) == A_VLAN
    neutron.unbind_port(p1["id"])
    print(f"unbind of both ports: {time.monotonic() - t:.2f}s")
    assert lab.ovs_tag(lab.eth_ports(n1)[0]) == QUARANTINE_VLAN, diag(lab, n1)
    assert not lab.ping(n1, n3) and not lab.ping(n3, n1)
    assert lab.ovs_tag(lab.eth_ports(n2)[0]) == B_VLAN, "unbinding project A's node leaves project B's alone"
    assert lab.ovs_tag(lab.eth_ports(n3)[0]) == A_VLAN


def test_ib_network_outside_gpufabric_range_is_refused(lab: LabEnv, neutron: Neutron) -> None:
    status, out = neutron.call("POST", "/networks", {"network": {
        "project_id": "proj-a", "name": "ib-out-of-range", "provider:network_type": "vlan",
        "provider:physical_network": IB_PHYSNET, "provider:segmentation_id": 4005}})  # fmt: skip
    assert status >= 400, out
    assert neutron.ok("GET", "/networks?name=ib-out-of-range")["networks"] == []


def test_port_of_unknown_switch_port_fails_binding(lab: LabEnv, neutron: Neutron) -> None:
    net = neutron.create_network("proj-c", "c-eth", ETH_PHYSNET, 2510)
    p = neutron.create_port("proj-c", net["id"], "ironic-x", [{"switch_info": "nosuch", "port_id": "nosuch9"}])
    assert p["binding:vif_type"] == "binding_failed"
