"""A real Neutron 29 with the gpufabric ML2 driver, driving a real ``gpufabric serve`` (API v1,
bearer token) on the lab (ibsim + OpenSM + OVS + netns). What the switches hold is read
without gpufabric: the switch port's VLAN with ovs-vsctl (OVSDB), the HCA's PKey table by
SMP (smpquery), reachability by ping between the nodes' namespaces.

Flow, as ESI does it: Neutron networks (one Ethernet on ``physnet1``, one InfiniBand on
``ib``) per project; Ironic-style bare-metal ports with ``local_link_information`` bind
through gpufabric's move workflow; unbinding sends the node to quarantine; a second
project's node on its own network stays isolated on both fabrics. The driver holds a
gpufabric ``service`` token (not admin) and reaches gpufabric over plain http on loopback
(``insecure = true``); Ironic's ``binding:host_id`` is mapped to the node by a node map.

Drill (issue 18): project X binds ports whose link info names project V's node (V holds it
through its own Neutron ports), or whose host is V's node, or on V's network: every bind
fails, V's node keeps its VLAN (ovs-vsctl) and PKey (SMP), and gpufabric records nothing (no
move, no lease, no event).
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

LAB_NODES = 4  # n1-n3: the bind/unbind flow; n4: the victim of the drill
QUARANTINE_VLAN = 4000
A_VLAN, B_VLAN, A_IBSEG = 2500, 2501, 3020
A_PKEY = 0x0A00 + (A_IBSEG - 3000)  # gpufabric's default offset mapping: seg 3000 -> PKey 0x0a00
V_VLAN, X_VLAN, V_IBSEG, X_IBSEG = 2530, 2531, 3025, 3026
V_PKEY = 0x0A00 + (V_IBSEG - 3000)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabEnv]:
    yield from lab_up(tmp_path_factory, LAB_NODES)


@pytest.fixture(scope="module")
def stack(lab: LabEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Neutron, GpufabricServe]]:
    d = tmp_path_factory.mktemp("neutron")
    t = time.monotonic()
    ensure_venv()
    print(f"neutron venv ready in {time.monotonic() - t:.1f}s")
    with GpufabricServe(lab, d) as gf:
        hosts = {f"ironic-{n['name']}": n["name"] for n in lab.status["nodes"]}  # as Ironic names hosts: node UUIDs
        n = Neutron(d / "etc", gf.url, gf.token_file, bind_timeout=240, node_map=hosts)
        try:
            t = time.monotonic()
            n.start()
            print(f"neutron API up in {time.monotonic() - t:.1f}s")
            yield n, gf
        finally:
            n.stop()


@pytest.fixture(scope="module")
def neutron(stack: tuple[Neutron, GpufabricServe]) -> Neutron:
    return stack[0]


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


def recorded(gf: GpufabricServe, node: str) -> dict[str, Any]:
    """What gpufabric holds about ``node`` and every change it recorded (read as admin)."""
    return {
        "node": {k: v for k, v in gf.api("GET", f"/nodes/{node}", admin=True).items() if k in ("tenant", "lease", "state")},
        "leases": gf.api("GET", "/leases?limit=500", admin=True)["items"],
        "moves": [(m["id"], m["node"], m["status"]) for m in gf.api("GET", "/moves?limit=500", admin=True)["items"]],
        "events": gf.api("GET", "/events?limit=1", admin=True)["total"],
        "networks": sorted((x["tenant"], x["name"]) for x in gf.api("GET", "/networks?limit=500", admin=True)["items"]),
    }


def test_drill_a_project_cannot_bind_another_projects_node(lab: LabEnv, stack: tuple[Neutron, GpufabricServe]) -> None:
    neutron, gf = stack
    n1, n4 = lab.status["nodes"][0]["name"], lab.status["nodes"][3]["name"]
    # project V holds n4 on both fabrics through its own Neutron ports
    v_eth = neutron.create_network("proj-v", "v-eth", ETH_PHYSNET, V_VLAN)
    v_ib = neutron.create_network("proj-v", "v-ib", IB_PHYSNET, V_IBSEG)
    for net, lli in ((v_eth, eth_lli(lab, n4)), (v_ib, ib_lli(lab, n4))):
        p = neutron.create_port("proj-v", net["id"], f"ironic-{n4}", lli, "v-n4")
        assert (p["status"], p["binding:vif_details"].get("gpufabric_node")) == ("ACTIVE", n4), p
    assert lab.ovs_tag(lab.eth_ports(n4)[0]) == V_VLAN and member_pkeys(lab, n4) == {V_PKEY}, diag(lab, n4)
    assert gf.api("GET", f"/nodes/{n4}")["tenant"] == "proj-v"
    # project X: its own networks (created before the snapshot), then the hostile ports
    x_eth = neutron.create_network("proj-x", "x-eth", ETH_PHYSNET, X_VLAN)
    x_ib = neutron.create_network("proj-x", "x-ib", IB_PHYSNET, X_IBSEG)
    n1_tag = lab.ovs_tag(lab.eth_ports(n1)[0])
    before = recorded(gf, n4)
    attempts = {
        "link info names V's node (Ethernet), host is another node": (x_eth, f"ironic-{n1}", eth_lli(lab, n4)),
        "link info names V's node (IB GUID), host is another node": (x_ib, f"ironic-{n1}", ib_lli(lab, n4)),
        "host and link info both name V's node": (x_eth, f"ironic-{n4}", eth_lli(lab, n4)),
        "X's port on V's network": (v_eth, f"ironic-{n1}", eth_lli(lab, n1)),
    }
    for what, (net, host, lli) in attempts.items():
        t = time.monotonic()
        p = neutron.create_port("proj-x", net["id"], host, lli, "x-hostile")
        assert p["binding:vif_type"] == "binding_failed", f"{what}: {p}"
        print(f"refused in {time.monotonic() - t:.2f}s: {what}")
        assert lab.ovs_tag(lab.eth_ports(n4)[0]) == V_VLAN, f"{what}: " + diag(lab, n4)
        assert member_pkeys(lab, n4) == {V_PKEY}, what
        assert lab.ovs_tag(lab.eth_ports(n1)[0]) == n1_tag, what
        assert recorded(gf, n4) == before, f"{what}: gpufabric recorded a change"
        neutron.ok("DELETE", f"/ports/{p['id']}")
    refusals = [ln for ln in neutron.errors() if "refused" in ln]
    assert len(refusals) >= len(attempts), refusals
