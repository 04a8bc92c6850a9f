"""A real Neutron 29 with the gpufabric ML2 driver, against the loopback contract server
(integrations/neutron/tests/fake_gpufabric.py): what Neutron really calls, with what, and
what the port becomes. Runs without a lab; the lab + real gpufabric version is
test_neutron_real.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .neutron_env import ETH_PHYSNET, IB2_PHYSNET, IB_PHYSNET, ROOT, Neutron, ensure_venv, free_port

pytestmark = pytest.mark.integration

FAKE = ROOT / "integrations" / "neutron" / "tests" / "fake_gpufabric.py"
ETH_LLI = [{"switch_id": "aa:bb:cc:dd:ee:01", "port_id": "Ethernet1/1", "switch_info": "leaf1"}]
IB_LLI = [{"switch_id": "0x0002c90300001000", "port_id": "0x0002c90300000201"}]
STORAGE_GUID = "0x0002c90500000101"  # node1's HCA on the second IB subnet (instance ib-storage)


def gname(net: dict[str, Any]) -> str:
    """The gpufabric network the driver makes of a Neutron network."""
    return "neutron-" + net["id"].replace("-", "")[:12]


class Contract:
    def __init__(self, state_file: Path) -> None:
        self.state_file = state_file

    def state(self) -> dict[str, Any]:
        return json.loads(self.state_file.read_text()) if self.state_file.exists() else {}

    def attachments(self) -> dict[str, list[str]]:
        return {n: v for n, v in self.state().get("attachments", {}).items() if v}

    def writes(self) -> list[list[str]]:
        return list(self.state().get("writes", []))


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Neutron, Contract]]:
    d = tmp_path_factory.mktemp("neutron")
    ensure_venv()
    token = d / "gpufabric.token"
    token.write_text("contract-token\n")
    os.chmod(token, 0o600)
    seed = d / "seed.json"
    seed.write_text(json.dumps({"switch_ports": [["leaf1", "Ethernet1/1", "node1"], ["leaf1", "Ethernet1/2", "node2"]],
                                "guids": {"0x0002c90300000201": "node2", STORAGE_GUID: "node1"},
                                "instances": {"ib-storage": ["infiniband", 3500, 3999, 0x1A00]},
                                "guid_instance": {STORAGE_GUID: "ib-storage"}}))  # fmt: skip
    port = free_port()
    fake = subprocess.Popen([sys.executable, str(FAKE), "--port", str(port), "--token-file", str(token), "--seed", str(seed),
                             "--state-out", str(d / "state.json")], stdout=subprocess.PIPE)  # fmt: skip
    assert fake.stdout is not None and b"fake gpufabric" in fake.stdout.readline()
    neutron = Neutron(d / "etc", f"http://127.0.0.1:{port}", token, bind_timeout=20,
                      node_map={"ironic-node1": "node1", "ironic-node2": "node2"},
                      ib_physnets=f"{IB_PHYSNET}:infiniband,{IB2_PHYSNET}:ib-storage")  # fmt: skip
    try:
        neutron.start()
        yield neutron, Contract(d / "state.json")
    finally:
        neutron.stop()
        fake.terminate()
        fake.wait(timeout=10)


def test_networks_on_gpufabric_physnets_are_adopted_others_ignored(env: tuple[Neutron, Contract]) -> None:
    neutron, gf = env
    eth = neutron.create_network("proj-a", "a-eth", ETH_PHYSNET, 2101)
    ib = neutron.create_network("proj-a", "a-ib", IB_PHYSNET, 3007)
    other = neutron.create_network("proj-a", "a-other", "physnet2", 150)
    nets = gf.state()["networks"]
    assert nets[gname(eth)]["segments"] == [{"fabric": "ethernet", "seg_id": 2101, "vlan": 2101, "pkey": None}]
    assert nets[gname(ib)]["segments"] == [{"fabric": "infiniband", "seg_id": 3007, "vlan": None, "pkey": "0x0a07"}]
    assert gname(other) not in nets


def test_ib_segment_outside_gpufabric_range_fails_the_network(env: tuple[Neutron, Contract]) -> None:
    neutron, gf = env
    status, out = neutron.call("POST", "/networks", {"network": {
        "project_id": "proj-a", "name": "bad-ib", "provider:network_type": "vlan",
        "provider:physical_network": IB_PHYSNET, "provider:segmentation_id": 4005}})  # fmt: skip
    assert status >= 500, out
    assert neutron.ok("GET", "/networks?name=bad-ib")["networks"] == []  # ML2 rolled it back
    assert any("3000-3999" in ln for ln in neutron.errors())
    assert all(seg["seg_id"] != 4005 for n in gf.state().get("networks", {}).values() for seg in n["segments"])


@pytest.mark.parametrize(("physnet", "seg", "lli", "node"), [(ETH_PHYSNET, 2110, ETH_LLI, "node1"), (IB_PHYSNET, 3010, IB_LLI, "node2")],
                         ids=["ethernet", "infiniband"])  # fmt: skip
def test_baremetal_port_binds_through_gpufabric_and_unbind_detaches(
    env: tuple[Neutron, Contract], physnet: str, seg: int, lli: list[dict[str, Any]], node: str
) -> None:
    neutron, gf = env
    net = neutron.create_network("proj-b", f"b-{seg}", physnet, seg)
    t = time.monotonic()
    p = neutron.create_port("proj-b", net["id"], f"ironic-{node}", lli)
    bind_s = time.monotonic() - t
    assert (p["status"], p["binding:vif_type"]) == ("ACTIVE", "other"), p
    assert p["binding:vif_details"]["gpufabric_node"] == node
    assert gf.attachments()[node] == [gname(net)]
    print(f"bind through Neutron + gpufabric contract server: {bind_s:.2f}s")

    unbound = neutron.unbind_port(p["id"])
    assert unbound["binding:vif_type"] == "unbound"
    assert node not in gf.attachments()
    neutron.ok("DELETE", f"/ports/{p['id']}")


def test_network_on_two_ib_physnets_is_one_network_on_both_subnets(env: tuple[Neutron, Contract]) -> None:
    """Issue 20: ib_physnets maps ib -> infiniband and ib-storage -> ib-storage (a contract
    server with that second IB instance); a Neutron network with a segment on each is one
    gpufabric network with each id on its own subnet, and node1's storage HCA binds it."""
    neutron, gf = env
    segs = [{"provider:network_type": "vlan", "provider:physical_network": phys, "provider:segmentation_id": sid}
            for phys, sid in ((IB_PHYSNET, 3020), (IB2_PHYSNET, 3520))]  # fmt: skip
    net = neutron.ok("POST", "/networks", {"network": {"project_id": "proj-g", "name": "g-ib2", "segments": segs}})["network"]
    assert gf.state()["networks"][gname(net)]["segments"] == [
        {"fabric": "infiniband", "seg_id": 3020, "vlan": None, "pkey": "0x0a14"},
        {"fabric": "ib-storage", "seg_id": 3520, "vlan": None, "pkey": "0x1a14"}]  # fmt: skip
    p = neutron.create_port("proj-g", net["id"], "ironic-node1", [{"port_guid": STORAGE_GUID}], "g-storage")
    assert (p["status"], p["binding:vif_type"], p["binding:vif_details"].get("gpufabric_node")) == (
        "ACTIVE", "other", "node1"), p  # fmt: skip
    assert gf.attachments()["node1"] == [gname(net)]
    neutron.ok("DELETE", f"/ports/{p['id']}")
    assert "node1" not in gf.attachments()


def test_port_of_unknown_node_is_binding_failed_not_half_bound(env: tuple[Neutron, Contract]) -> None:
    neutron, gf = env
    net = neutron.create_network("proj-c", "c-eth", ETH_PHYSNET, 2120)
    p = neutron.create_port("proj-c", net["id"], "ironic-x", [{"switch_info": "leaf9", "port_id": "Ethernet9/9"}])
    assert p["binding:vif_type"] == "binding_failed"
    assert p["status"] == "DOWN"
    assert all(gname(net) not in v for v in gf.attachments().values())
    neutron.ok("DELETE", f"/ports/{p['id']}")


def test_delete_of_bound_port_detaches(env: tuple[Neutron, Contract]) -> None:
    neutron, gf = env
    net = neutron.create_network("proj-d", "d-eth", ETH_PHYSNET, 2130)
    p = neutron.create_port("proj-d", net["id"], "ironic-node1", ETH_LLI)
    assert p["status"] == "ACTIVE"
    neutron.ok("DELETE", f"/ports/{p['id']}")
    assert "node1" not in gf.attachments()
    neutron.ok("DELETE", f"/networks/{net['id']}")
    assert gname(net) not in gf.state()["networks"]


@pytest.mark.parametrize(
    ("port_project", "host", "lli", "vlan"),
    [("proj-e", "ironic-node1", ETH_LLI, 2141), ("proj-f", "ironic-node2", ETH_LLI, 2142),
     ("proj-f", "ironic-nosuch", ETH_LLI, 2143)],
    ids=["port-project-is-not-the-networks", "link-info-is-another-nodes", "host-unknown"],
)  # fmt: skip
def test_refused_bind_writes_nothing(env: tuple[Neutron, Contract], port_project: str, host: str, lli: list[dict[str, Any]],
                                     vlan: int) -> None:  # fmt: skip
    """Issue 18: a port of project E on project F's network, or link info that is not a port of
    the host's node, is binding_failed and gpufabric receives no write at all."""
    neutron, gf = env
    net = neutron.create_network("proj-f", f"f-{vlan}", ETH_PHYSNET, vlan)
    before = gf.writes()
    p = neutron.create_port(port_project, net["id"], host, lli)
    assert (p["binding:vif_type"], p["status"]) == ("binding_failed", "DOWN"), p
    assert gf.writes() == before, "refused before any write to gpufabric"
    assert any("refused" in ln for ln in neutron.errors()), neutron.errors()[-3:]
    neutron.ok("DELETE", f"/ports/{p['id']}")


def test_driver_logs_the_insecure_transport(env: tuple[Neutron, Contract]) -> None:
    neutron, _ = env
    assert any("TRANSPORT-INSECURE" in ln and "plain HTTP" in ln for ln in neutron.log_lines(" WARNING ")), \
        "an http:// gpufabric url is allowed only with insecure = true, and said so in the log"
