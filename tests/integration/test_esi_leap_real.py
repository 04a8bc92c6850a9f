"""esi-leap lessees mirrored into a real ``gpufabric serve`` on the lab: a lease created in a
real esi-leap (dummy node standing for a lab node), fulfilled by esi-leap's manager job,
becomes the node's gpufabric lease for the lessee's project with NO networks even though the
project has one (an empty list means none: the port stays off the project's VLAN and out of
its partition); with the project's network attached (as the ML2 driver does on bind) the
switch port carries its VLAN (read by OVSDB);
when esi-leap expires the lease the mirror sends the node to quarantine on every fabric
(VLAN 4000, no tenant PKey, read by SMP), before any Ironic teardown."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .esi_env import EsiLeap
from .esi_env import ensure_venv as ensure_esi_venv
from .gf_env import GpufabricServe, lab_up
from e2e.conftest import LabEnv

pytestmark = [pytest.mark.integration, pytest.mark.root]

LAB_NODES = 2
LESSEE = "4c1d2e3f5a6b7c8d9e0f1a2b3c4d5e6f"  # a Keystone project id, as esi-leap records lessees
VLAN, IB_SEG = 2600, 3030
PKEY = 0x0A00 + IB_SEG - 3000
QUARANTINE_VLAN = 4000


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabEnv]:
    yield from lab_up(tmp_path_factory, LAB_NODES)


@pytest.fixture(scope="module")
def env(lab: LabEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EsiLeap, GpufabricServe]]:
    d = tmp_path_factory.mktemp("esi-real")
    ensure_esi_venv()
    esi = EsiLeap(d / "esi")
    with GpufabricServe(lab, d) as gf:
        try:
            esi.start()
            yield esi, gf
        finally:
            esi.stop()


def member_pkeys(lab: LabEnv, node: str) -> set[int]:
    table = lab.pkey_tables()[lab.guids(node)[0]]
    return {e & 0x7FFF for e in table if e & 0x8000 and e & 0x7FFF != 0x7FFF}


def wait_for(what: str, check: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


def test_esi_leap_lease_is_mirrored_and_expiry_quarantines(lab: LabEnv, env: tuple[EsiLeap, GpufabricServe], tmp_path: Path) -> None:
    esi, gf = env
    node = lab.status["nodes"][0]["name"]
    esi_node = esi.add_node()
    state = tmp_path / "sync.json"
    port = lab.eth_ports(node)[0]

    # the lessee's project already has a network (made by Neutron for an earlier node, say)
    gf.api("POST", "/tenants", {"name": LESSEE})
    gf.api("POST", "/networks", {"name": "esi-net", "tenant": LESSEE,
                                 "segments": [{"fabric": "ethernet", "seg_id": VLAN}, {"fabric": "infiniband", "seg_id": IB_SEG}]})  # fmt: skip
    esi.lease(esi_node, LESSEE, seconds=20)
    t0 = time.monotonic()  # the lease ends by t0 + its length; a loaded machine takes seconds to start each esi-leap job
    esi.tick()
    assert esi.node(esi_node)["project_id"] == LESSEE
    esi.sync(gf.url, gf.token_file, {esi_node: node}, state)
    assert gf.api("GET", f"/nodes/{node}")["tenant"] == LESSEE
    leases = [x for x in gf.api("GET", f"/leases?node={node}&state=active")["items"]]
    assert [(x["tenant"], x["networks"]) for x in leases] == [(LESSEE, [])], "an empty list means no networks"
    assert lab.ovs_tag(port) != VLAN and PKEY not in member_pkeys(lab, node), "no network until one is attached"

    # the project's network, attached as the ML2 driver does when Ironic binds the node's port
    gf.api("POST", f"/nodes/{node}/attachments", {"network": "esi-net", "tenant": LESSEE})
    wait_for("the node's VLAN and PKey", lambda: lab.ovs_tag(port) == VLAN and PKEY in member_pkeys(lab, node))

    time.sleep(max(0.0, 20.5 - (time.monotonic() - t0)))
    esi.tick()  # esi-leap expires the lease
    assert "project_id" not in esi.node(esi_node)
    t = time.monotonic()
    esi.sync(gf.url, gf.token_file, {esi_node: node}, state)
    print(f"expiry mirrored to quarantine in {time.monotonic() - t:.2f}s")
    assert gf.api("GET", f"/nodes/{node}")["tenant"] == "quarantine"
    assert lab.ovs_tag(port) == QUARANTINE_VLAN
    assert member_pkeys(lab, node) == set()
    assert gf.api("GET", f"/leases?node={node}&state=active")["items"] == []
