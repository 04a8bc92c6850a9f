"""Ethernet bonds: inventory `bond`/`bond_mode`, plans on the aggregate (members untouched,
quarantine shuts the aggregate), MLAG/vPC halves, the bond invariants, the store round trip."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gpufabric.domain.errors import ConflictError, ValidationError
from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import Inventory, Lease, Network, Node
from gpufabric.domain.values import PortNaming, VlanId
from gpufabric.fabrics.ethernet.drivers.ssh.dialects import load_dialect
from gpufabric.fabrics.ethernet.entries import EthernetPort, ethernet_ports
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState
from gpufabric.store.core import Store
from gpufabric.workflow.inventory import inventory_from_dict

from support.ports import port_node
from support.segments import segment

KIND = EthernetKind()
T0 = datetime(2026, 1, 1, tzinfo=UTC)
Q = 4000


def _inv(*nodes: dict[str, Any]) -> Inventory:
    return inventory_from_dict({"version": 1, "nodes": list(nodes)})


def _mlag(name: str = "gpu-b01", bond: str = "Port-Channel10", **extra: Any) -> dict[str, Any]:
    return {"name": name, "ethernet": [
        {"name": "eth0", "switch": "leaf01", "switch_port": "Ethernet1", "bond": bond, **extra},
        {"name": "eth1", "switch": "leaf02", "switch_port": "Ethernet1", "bond": bond, **extra},
    ]}  # fmt: skip


def _tenancy(nodes: tuple[Node, ...], tenant: str | None, vlan: int = 2001) -> Tenancy:
    net = Network("n1", "acme", (segment("ethernet", vlan, vlan=VlanId(vlan)),))
    owners = {n.name: (Lease(tenant, n.name, T0, networks=("n1",)) if tenant else None) for n in nodes}
    return Tenancy(nodes, owners, {("acme", "n1"): net}, settings={"quarantine_vlan": Q})


def test_inventory_reads_bonds_with_lacp_default() -> None:
    (node,) = _inv(_mlag()).nodes
    assert [(p.switch_port, p.bond, p.bond_mode, p.managed_port) for p in ethernet_ports(node)] == [
        ("Ethernet1", "Port-Channel10", "lacp", "Port-Channel10"), ("Ethernet1", "Port-Channel10", "lacp", "Port-Channel10")]
    (ab,) = _inv(_mlag(bond_mode="active-backup")).nodes
    assert {p.bond_mode for p in ethernet_ports(ab)} == {"active-backup"}


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"name": "n1", "ethernet": [{"name": "eth0", "switch": "s", "switch_port": "p1", "bond_mode": "lacp"}]},
         "nodes[0].ethernet[0].bond_mode"),
        (_mlag(bond_mode="balance-rr"), "nodes[0].ethernet[0].bond_mode"),
        ({"name": "n1", "ethernet": [{"name": f"eth{i}", "switch": f"leaf0{i}", "switch_port": "p1", "bond": "bond0"}
                                     for i in range(3)]}, "nodes[0].ethernet[0].bond"),
        ({"name": "n1", "ethernet": [{"name": "eth0", "switch": "s", "switch_port": "p1", "bond": "bond0"},
                                     {"name": "eth1", "switch": "s", "switch_port": "p2", "bond": "bond0",
                                      "bond_mode": "active-backup"}]}, "nodes[0].ethernet[0].bond_mode"),
        ({"name": "n1", "ethernet": [{"name": "eth0", "switch": "s", "switch_port": "p1", "bond": "p2"},
                                     {"name": "eth1", "switch": "s", "switch_port": "p2"}]}, "nodes[0].ethernet[0].bond"),
    ],
    ids=["mode-without-bond", "unknown-mode", "three-switches", "mixed-modes", "aggregate-is-a-plain-port"],
)  # fmt: skip
def test_inventory_refuses_bad_bonds(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as e:
        _inv(doc)
    assert e.value.field == field


def test_inventory_refuses_another_nodes_aggregate() -> None:
    with pytest.raises(ValidationError) as e:
        _inv(_mlag("gpu-b01"), {"name": "gpu-b02", "ethernet": [
            {"name": "eth0", "switch": "leaf01", "switch_port": "Ethernet2", "bond": "Port-Channel10"}]})  # fmt: skip
    assert e.value.field == "nodes[1].ethernet[0].bond" and "gpu-b01" in str(e.value)


def _eos_names() -> PortNaming:
    naming = load_dialect("eos").port_naming
    assert naming is not None
    return naming


def test_inventory_refuses_a_dialects_wrong_aggregate_name() -> None:
    with pytest.raises(ValidationError, match="eos interface name"):
        inventory_from_dict({"version": 1, "nodes": [_mlag(bond="po10")]}, dialects={"leaf01": _eos_names()})


def test_plan_sets_vlans_on_the_aggregates_only_and_quarantine_shuts_them() -> None:
    nodes = _inv(_mlag()).nodes
    want = KIND.desired(_tenancy(nodes, "acme"))
    assert [(s.switch, s.ports) for s in want] == [
        ("leaf01", (EthernetPortConfig("leaf01", "Port-Channel10", PortMode.ACCESS, VlanId(2001)),)),
        ("leaf02", (EthernetPortConfig("leaf02", "Port-Channel10", PortMode.ACCESS, VlanId(2001)),)),
    ]
    quarantined = KIND.desired(_tenancy(nodes, None))
    plan = KIND.diff(quarantined, want)
    assert [(c.after.switch, c.after.port, c.after.mode) for c in plan.changes] == [
        ("leaf01", "Port-Channel10", PortMode.SHUTDOWN), ("leaf02", "Port-Channel10", PortMode.SHUTDOWN)]
    removals, additions = KIND.diff(want, quarantined).split()
    assert additions.empty is False and all(c.after.port == "Port-Channel10" for c in removals.changes + additions.changes)


def test_two_members_on_one_switch_are_one_aggregate() -> None:
    nodes = _inv({"name": "n1", "ethernet": [
        {"name": "eth0", "switch": "leaf01", "switch_port": "Ethernet1", "bond": "Port-Channel7"},
        {"name": "eth1", "switch": "leaf01", "switch_port": "Ethernet2", "bond": "Port-Channel7"}]}).nodes  # fmt: skip
    (sw,) = KIND.desired(_tenancy(nodes, "acme"))
    assert [p.port for p in sw.ports] == ["Port-Channel7"]


def test_tenants_seen_reads_the_aggregates_and_sees_a_half_bond() -> None:
    nodes = _inv(_mlag()).nodes
    t = _tenancy(nodes, "acme")
    half = (SwitchState("leaf01", (EthernetPortConfig("leaf01", "Port-Channel10", PortMode.ACCESS, VlanId(2001)),)),
            SwitchState("leaf02", (EthernetPortConfig("leaf02", "Port-Channel10", PortMode.ACCESS, VlanId(Q)),)))
    assert KIND.tenants_seen(half, t) == {"gpu-b01": frozenset({"acme", "quarantine"})}
    got = [(v.invariant, v.node, v.port) for v in KIND.audit(t, KIND.desired(t), half)]
    assert got == [("X-DRIFT", "gpu-b01", "Port-Channel10"), ("ETH-BOND-SPLIT", "gpu-b01", "Port-Channel10")]


def test_audit_finds_a_member_with_vlans_of_its_own() -> None:
    nodes = _inv(_mlag()).nodes
    t = _tenancy(nodes, "acme")
    obs = tuple(SwitchState(sw, (EthernetPortConfig(sw, "Port-Channel10", PortMode.ACCESS, VlanId(2001)),
                                 EthernetPortConfig(sw, "Ethernet1", PortMode.ACCESS, VlanId(2001 if sw == "leaf01" else 2999),
                                                    bond="Port-Channel10")))
                for sw in ("leaf01", "leaf02"))  # fmt: skip
    got = [(v.invariant, v.device, v.port) for v in KIND.audit(t, KIND.desired(t), obs)]
    assert got == [("ETH-BOND-MEMBER-VLAN", "leaf02", "Ethernet1")]
    assert list(KIND.audit(t, KIND.desired(t), KIND.desired(t))) == []


def test_store_keeps_bonds_and_refuses_another_nodes_aggregate(tmp_path: Path) -> None:
    with Store.open(f"sqlite:///{tmp_path / 'x.db'}") as store:
        store.upsert_inventory(_inv(_mlag()))
        (node,) = store.nodes()
        assert {(p.bond, p.bond_mode) for p in ethernet_ports(node)} == {("Port-Channel10", "lacp")}
        other = Inventory((port_node("gpu-b02", ethernet=(EthernetPort("gpu-b02", "eth0", "leaf01", "Ethernet9", "",
                                                                  "Port-Channel10", "lacp"),)),))  # fmt: skip
        with pytest.raises(ConflictError, match="Port-Channel10"):
            store.upsert_inventory(other)
        assert [n.name for n in store.nodes()] == ["gpu-b01"]
