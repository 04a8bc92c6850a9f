"""Bond members on real configurations (issue 21): the real SONiC config_db.json (Force10-S6000
ToR, routed one-member PortChannels) and Junos topology r1 (routed ae0 of two ``802.3ad``
members) of tests/fixtures/real/ethernet/, as read (no member read: a routed aggregate's
members are no host ports, as on the IOS-like dialects) and with the aggregate turned into a
switching one by the smallest edit of the real text: then the members are read in their
aggregate, and one pulled out of it or moved to another is planned back and reported."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import Lease, Network
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.audit.bonds import OUT_ID
from gpufabric.fabrics.ethernet.drivers.ssh.dialects import load_dialect
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.ethernet.readers.running_config import parse_running_config
from gpufabric.fabrics.ethernet.state import PortMode, SwitchState
from gpufabric.workflow.inventory import inventory_from_dict

from support.real_outputs import manifest, real_output
from support.segments import segment

KIND = EthernetKind()
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SONIC = ("ethernet/sonic", "sonicutils-s6000-t0-config_db.json")
JUNOS = ("ethernet/junos", "batfish-topology-r1-ae.set")


def _read(dialect: str, text: str) -> SwitchState:
    return parse_running_config(load_dialect(dialect), text, switch="leaf01")


def _tenancy(members: tuple[str, ...], bond: str, vlan: int) -> Tenancy:
    eth = [{"name": f"eth{i}", "switch": "leaf01", "switch_port": m, "bond": bond} for i, m in enumerate(members)]
    nodes = inventory_from_dict({"version": 1, "nodes": [{"name": "gpu-b01", "ethernet": eth}]}).nodes
    net = Network("n1", "acme", (segment("ethernet", vlan, vlan=VlanId(vlan)),))
    return Tenancy(nodes, {"gpu-b01": Lease("acme", "gpu-b01", T0, networks=("n1",))}, {("acme", "n1"): net},
                   settings={"quarantine_vlan": 4000})  # fmt: skip


def _l2_sonic() -> dict[str, Any]:
    """The real db with PortChannel0001 and PortChannel0002 switching (untagged in Vlan1000, their
    INTERFACE addresses gone), as ``config vlan member add -u 1000 PortChannel000N`` leaves it."""
    db = json.loads(real_output(manifest(*SONIC)))
    for pc in ("PortChannel0001", "PortChannel0002"):
        db["PORTCHANNEL_INTERFACE"] = {k: v for k, v in db["PORTCHANNEL_INTERFACE"].items() if not k.startswith(pc)}
        db["VLAN_MEMBER"][f"Vlan1000|{pc}"] = {"tagging_mode": "untagged"}
    return db


def test_sonic_real_routed_portchannel_members_are_not_read() -> None:
    db = json.loads(real_output(manifest(*SONIC)))
    assert sorted(db["PORTCHANNEL_MEMBER"]) == [
        f"PortChannel000{i}|Ethernet{p}" for i, p in enumerate((112, 116, 120, 124), 1)
    ]
    st = _read("sonic", json.dumps(db))
    assert not [
        p for p in st.ports if p.bond or p.port.startswith("PortChannel") or p.port in ("Ethernet112", "Ethernet116")
    ]


def test_sonic_real_members_of_a_switching_portchannel_are_read_in_it() -> None:
    st = _read("sonic", json.dumps(_l2_sonic()))
    got = {
        p.port: (p.mode, p.vlan, p.bond) for p in st.ports if p.port in ("Ethernet112", "Ethernet116", "Ethernet120")
    }
    acc = PortMode.ACCESS
    assert got == {
        "Ethernet112": (acc, VlanId(1000), "PortChannel0001"),
        "Ethernet116": (acc, VlanId(1000), "PortChannel0002"),
    }


def test_sonic_real_member_moved_to_another_portchannel_is_planned_back_and_reported() -> None:
    """``config portchannel member del PortChannel0001 Ethernet112`` + ``add PortChannel0002``:
    PORTCHANNEL_MEMBER is what is read (the db's older ``members`` list of PortChannel0001 still
    names Ethernet112 and is not)."""
    db = _l2_sonic()
    del db["PORTCHANNEL_MEMBER"]["PortChannel0001|Ethernet112"]
    db["PORTCHANNEL_MEMBER"]["PortChannel0002|Ethernet112"] = {}
    assert "Ethernet112" in db["PORTCHANNEL"]["PortChannel0001"]["members"]
    st, t = _read("sonic", json.dumps(db)), _tenancy(("Ethernet112",), "PortChannel0001", 1000)
    assert {p.port: p.bond for p in st.ports if p.port == "Ethernet112"} == {"Ethernet112": "PortChannel0002"}
    plan = KIND.diff(KIND.desired(t), (st,))
    assert [str(c) for c in plan.changes] == [
        "ethernet leaf01/Ethernet112: member of PortChannel0002 -> member of PortChannel0001"
    ]
    got = [(v.port, v.message) for v in KIND.audit(t, KIND.desired(t), (st,)) if v.invariant == OUT_ID]
    assert got == [
        ("Ethernet112", "gpu-b01 eth0: member leaf01/Ethernet112 is in PortChannel0002, not in PortChannel0001")
    ]


ROUTED_AE0 = "set interfaces ae0 unit 0 family inet address 3.0.0.0/31\n"


def test_junos_real_routed_ae_members_are_not_read() -> None:
    text = real_output(manifest(*JUNOS))
    assert ROUTED_AE0 in text and "set interfaces ge-0/0/3 ether-options 802.3ad ae0\n" in text
    assert _read("junos", text).ports == ()


def test_junos_real_members_of_a_switching_ae_are_read_and_one_pulled_out_is_planned_back() -> None:
    text = real_output(manifest(*JUNOS)).replace(
        ROUTED_AE0, "set interfaces ae0 unit 0 family ethernet-switching vlan members 100\n"
    )
    st = _read("junos", text)
    acc = PortMode.ACCESS
    assert {p.port: (p.mode, p.vlan, p.bond) for p in st.ports} == {
        "ae0": (acc, VlanId(100), ""), "ge-0/0/2": (acc, VlanId(100), "ae0"), "ge-0/0/3": (acc, VlanId(100), "ae0"),
    }  # fmt: skip
    out = text.replace(
        "set interfaces ge-0/0/3 ether-options 802.3ad ae0\n",
        "set interfaces ge-0/0/3 unit 0 family ethernet-switching vlan members 300\n",
    )  # ge-0/0/3 pulled out of ae0, into VLAN 300 of its own
    st, t = _read("junos", out), _tenancy(("ge-0/0/2", "ge-0/0/3"), "ae0", 100)
    plan = KIND.diff(KIND.desired(t), (st,))
    assert [str(c) for c in plan.changes] == ["ethernet leaf01/ge-0/0/3: access 300 -> member of ae0"]
    got = [(v.port, v.message) for v in KIND.audit(t, KIND.desired(t), (st,)) if v.invariant == OUT_ID]
    assert got == [("ge-0/0/3", "gpu-b01 eth1: member leaf01/ge-0/0/3 is outside any aggregate, not in ae0")]
