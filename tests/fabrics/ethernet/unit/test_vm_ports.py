"""VM ports of shared hosts (issue 33) on the Ethernet kind: the ``gpu`` field of an entry, the
desired VM ports and uplink trunk of a host leased in ``vm-host`` with slots A (GPUs 1-4, tenant a),
B (5-6, b), C (7-8, c), a slot move that changes only that slot's ports and the trunk's VLAN of it,
and the two audits (ETH-VM-PORT-FOREIGN, ETH-UPLINK-FOREIGN-VLAN), on a hand-built Tenancy."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import QUARANTINE, Lease, Network, Node, Offering
from gpufabric.domain.slots import SHARED, SLOTS, VM_HOST, slot_name
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.audit import slots as slot_audit
from gpufabric.fabrics.ethernet.audit.isolation import EthAudit, ports_seen
from gpufabric.fabrics.ethernet.entries import (
    EthernetPort,
    dump_ethernet,
    ethernet_ports,
    parse_ethernet,
    with_ethernet,
)
from gpufabric.fabrics.ethernet.plan import desired_switches, diff_switches, tenants_seen
from gpufabric.fabrics.ethernet.segments import vlan_segment
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState

T0 = datetime(2026, 1, 1, tzinfo=UTC)
QV = 4000
HOST, OTHER, HV = "gpu-a01", "gpu-a02", "hv-gpu-a01"
VLANS = {"infra": 2000, "a": 2001, "b": 2002, "c": 2003, "d": 2004}
SLOTS_OF = {"a": (1, 2, 3, 4), "b": (5, 6), "c": (7, 8)}


def _host() -> Node:
    ports = [EthernetPort(HOST, "eth0", "leaf1", "p1")]
    ports += [EthernetPort(HOST, f"vm{m}", HV, f"vm{m}", gpu=m) for m in range(1, 9)]
    return with_ethernet(Node(HOST), *ports)


def tenancy(owners: dict[str, str | None] | None = None, shared: bool = True, infra_nets: bool = False) -> Tenancy:
    """``HOST`` leased to infra (in vm-host when ``shared``), its slots leased per ``owners``
    (slot tenant -> lease tenant, None: quarantine); ``OTHER`` leased to a (plain node)."""
    owners = {t: t for t in SLOTS_OF} if owners is None else owners
    slots = [Node(slot_name(HOST, mods), host=HOST, slot_modules=mods) for mods in SLOTS_OF.values()]
    nets = {(t, "net"): Network("net", t, (vlan_segment("ethernet", v),)) for t, v in VLANS.items()}
    leases: dict[str, Lease | None] = {
        HOST: Lease(
            "infra", HOST, T0, networks=("net",) if infra_nets else (), offering=VM_HOST if shared else "baremetal"
        ),
        OTHER: Lease("a", OTHER, T0, networks=("net",)),
    }
    for t, s in zip(SLOTS_OF, slots, strict=True):
        who = owners.get(t)
        leases[s.name] = Lease(who, s.name, T0, networks=("net",)) if who else None
    other = with_ethernet(Node(OTHER), EthernetPort(OTHER, "eth0", "leaf1", "p2"))
    return Tenancy(
        nodes=(_host(), other, *slots), owners=leases, networks=nets,
        offerings={VM_HOST: Offering(VM_HOST, settings=((SHARED, SLOTS),)), "baremetal": Offering("baremetal")},
        settings={"quarantine_vlan": QV},
    )  # fmt: skip


def ports(state: tuple[SwitchState, ...]) -> dict[tuple[str, str], EthernetPortConfig]:
    return {(c.switch, c.port): c for s in state for c in s.ports}


def access(sw: str, port: str, vlan: int) -> EthernetPortConfig:
    return EthernetPortConfig(sw, port, PortMode.ACCESS, VlanId(vlan))


def trunk(sw: str, port: str, *vlans: int) -> EthernetPortConfig:
    return EthernetPortConfig(sw, port, PortMode.TRUNK, None, tuple(VlanId(v) for v in vlans))


# ---------------------------------------------------------------------- entries
def test_gpu_entry_round_trips() -> None:
    raw = [
        {"name": "vm3", "switch": HV, "switch_port": "vm3", "gpu": 3},
        {"name": "eth0", "switch": "leaf1", "switch_port": "p1"},
    ]
    got = parse_ethernet(HOST, raw, "nodes[0].ethernet")
    assert [(p.name, p.gpu) for p in got] == [("eth0", None), ("vm3", 3)]
    assert parse_ethernet(HOST, dump_ethernet(got), "x") == got


@pytest.mark.parametrize(("entry", "field", "value"), [
    ({"gpu": 0}, "nodes[0].ethernet[0].gpu", 0),
    ({"gpu": 65}, "nodes[0].ethernet[0].gpu", 65),
    ({"gpu": "1"}, "nodes[0].ethernet[0].gpu", "1"),
    ({"gpu": True}, "nodes[0].ethernet[0].gpu", True),
    ({"gpu": 1, "bond": "bond0"}, "nodes[0].ethernet[0].bond", "bond0"),
])  # fmt: skip
def test_bad_gpu_is_one_line_naming_the_field(entry: dict[str, object], field: str, value: object) -> None:
    raw = [{"name": "vm1", "switch": HV, "switch_port": "vm1", **entry}]
    with pytest.raises(ValidationError) as e:
        parse_ethernet(HOST, raw, "nodes[0].ethernet")
    assert e.value.fields["field"] == field and e.value.fields["value"] == value
    assert "\n" not in str(e.value) and field in str(e.value)


def test_two_vm_ports_of_one_gpu_on_one_switch_are_refused() -> None:
    raw = [{"name": f"vm{k}", "switch": HV, "switch_port": f"vm{k}", "gpu": 2} for k in (1, 2)]
    with pytest.raises(ValidationError, match=r"nodes\[0\].ethernet\[1\].gpu"):
        parse_ethernet(HOST, raw, "nodes[0].ethernet")


# ---------------------------------------------------------------------- desired
def test_shared_host_vm_ports_follow_their_slot_and_the_uplink_trunks_every_slot() -> None:
    got = ports(desired_switches(tenancy()))
    for t, mods in SLOTS_OF.items():
        for m in mods:
            assert got[(HV, f"vm{m}")] == access(HV, f"vm{m}", VLANS[t])
    assert got[("leaf1", "p1")] == trunk("leaf1", "p1", 2001, 2002, 2003)
    assert got[("leaf1", "p2")] == access("leaf1", "p2", 2001)  # a plain node: unchanged


def test_one_slot_gives_a_trunk_of_one_vlan_and_the_hosts_own_networks_stay() -> None:
    got = ports(desired_switches(tenancy({"a": "a"}, infra_nets=True)))
    assert got[("leaf1", "p1")] == trunk("leaf1", "p1", 2000, 2001)
    assert got[(HV, "vm5")].mode is PortMode.SHUTDOWN  # no slot holds GPU 5: quarantine
    only = ports(desired_switches(tenancy({"a": "a"})))
    assert only[("leaf1", "p1")] == trunk("leaf1", "p1", 2001)  # a trunk even of one VLAN


def test_no_slot_shuts_the_uplink() -> None:
    got = ports(desired_switches(tenancy({})))
    assert got[("leaf1", "p1")].mode is PortMode.SHUTDOWN
    assert {got[(HV, f"vm{m}")].mode for m in range(1, 9)} == {PortMode.SHUTDOWN}


def test_non_shared_host_is_unchanged_its_vm_ports_follow_the_host() -> None:
    got = ports(desired_switches(tenancy(shared=False, infra_nets=True)))
    assert got[("leaf1", "p1")] == access("leaf1", "p1", 2000)
    assert {got[(HV, f"vm{m}")] for m in range(1, 9)} == {access(HV, f"vm{m}", 2000) for m in range(1, 9)}


@pytest.mark.parametrize(
    ("b_to", "trunk_vlans"), [(None, (2001, 2003)), ("d", (2001, 2003, 2004)), ("a", (2001, 2003))]
)
def test_a_slot_move_changes_only_that_slots_ports_and_the_trunk(
    b_to: str | None, trunk_vlans: tuple[int, ...]
) -> None:
    before = desired_switches(tenancy())
    after = desired_switches(tenancy({"a": "a", "b": b_to, "c": "c"}))
    plan = diff_switches(after, before)
    changed = {(c.after.switch, c.after.port) for c in plan.changes}
    assert changed == {(HV, "vm5"), (HV, "vm6"), ("leaf1", "p1")}
    assert ports(after)[("leaf1", "p1")] == trunk("leaf1", "p1", *trunk_vlans)
    removals, _ = plan.split()  # quarantine first: the trunk loses b's VLAN before d's arrives
    trunk_mid = next(c.after for c in removals.changes if c.after.port == "p1")
    assert 2002 not in trunk_mid.vlans() and 2004 not in trunk_mid.vlans()


# ---------------------------------------------------------------------- audit
def _audit(t: Tenancy, observed: tuple[SwitchState, ...]) -> list[tuple[str, str, str]]:
    return sorted((v.invariant, v.port, v.resource) for v in slot_audit.audit(t, observed))


def _with(state: tuple[SwitchState, ...], *cfgs: EthernetPortConfig) -> tuple[SwitchState, ...]:
    by = {c.port: c for c in cfgs}
    return tuple(
        replace(s, ports=tuple(by.get(p.port, p) if p.switch == s.switch else p for p in s.ports)) for s in state
    )


def test_clean_shared_host_has_no_violation_anywhere() -> None:
    t = tenancy()
    obs = desired_switches(t)
    assert _audit(t, obs) == []
    assert list(EthAudit.build(t, obs, obs).violations()) == []


def test_vm_port_in_another_tenants_vlan() -> None:
    t = tenancy()
    obs = _with(desired_switches(t), access(HV, "vm5", 2001))
    assert _audit(t, obs) == [("ETH-VM-PORT-FOREIGN", "vm5", "vlan:2001")]


def test_vm_port_of_a_gpu_no_slot_holds_in_a_tenant_vlan() -> None:
    t = tenancy({"a": "a", "c": "c"})
    obs = _with(desired_switches(t), access(HV, "vm6", 2002))
    assert _audit(t, obs) == [("ETH-VM-PORT-FOREIGN", "vm6", "vlan:2002")]


def test_uplink_keeps_a_vlan_of_a_tenant_without_a_slot() -> None:
    t = tenancy({"a": "a", "c": "c"})
    obs = _with(desired_switches(t), trunk("leaf1", "p1", 2001, 2002, 2003))
    assert _audit(t, obs) == [("ETH-UPLINK-FOREIGN-VLAN", "p1", "vlan:2002")]
    # ... and the plain trunk/shared checks leave the shared uplink to this audit
    assert not [v for v in EthAudit.build(t, None, obs).violations() if v.port == "p1"]


def test_seen_tenants_count_vm_ports_for_their_slot_and_the_uplink_for_the_host() -> None:
    t = tenancy()
    obs = desired_switches(t)
    seen = tenants_seen(obs, t, QV)
    assert seen[HOST] == {"infra"}
    assert {seen[slot_name(HOST, m)] for m in SLOTS_OF.values()} == {
        frozenset({"a"}),
        frozenset({"b"}),
        frozenset({"c"}),
    }
    by_node = {(p.node, p.port): p.tenants for p in ports_seen(t, obs)}
    assert by_node[(HOST, "p1")] == {"infra"} and by_node[(slot_name(HOST, (5, 6)), "vm5")] == {"b"}
    leaked = _with(obs, trunk("leaf1", "p1", 2001, 2002, 2003, 2004))
    assert tenants_seen(leaked, t, QV)[HOST] == {"infra", "d"}


def test_a_quarantined_slots_vm_ports_are_seen_in_quarantine_for_it() -> None:
    t = tenancy({"a": "a", "c": "c"})
    seen = tenants_seen(desired_switches(t), t, QV)
    assert seen[slot_name(HOST, (5, 6))] == {QUARANTINE} and seen[HOST] == {"infra"}
    assert [p.gpu for p in ethernet_ports(t.nodes[0]) if p.gpu] == list(range(1, 9))


# ---------------------------------------------------------------------- check_slot
def test_a_slot_of_gpus_without_a_vm_port_is_refused_naming_gpus() -> None:
    from gpufabric.fabrics.ethernet.kind import EthernetKind

    kind = EthernetKind()
    partial = with_ethernet(Node(HOST), EthernetPort(HOST, "eth0", "leaf1", "p1"),
                            *(EthernetPort(HOST, f"vm{m}", HV, f"vm{m}", gpu=m) for m in range(1, 5)))  # fmt: skip
    kind.check_slot(partial, frozenset({1, 2}))  # accepted
    with pytest.raises(ValidationError) as e:
        kind.check_slot(partial, frozenset({3, 4, 5, 6}))
    assert e.value.fields["field"] == "gpus" and "GPU(s) 5, 6 have no ethernet VM port" in str(e.value)
    assert "\n" not in str(e.value)
    kind.check_slot(
        with_ethernet(Node(HOST), EthernetPort(HOST, "eth0", "leaf1", "p1")), frozenset({5, 6})
    )  # no VM ports


def test_a_slot_shows_its_hosts_vm_ports_of_its_gpus() -> None:
    from gpufabric.fabrics.ethernet.kind import EthernetKind

    kind, t = EthernetKind(), tenancy()
    b = next(n for n in t.nodes if n.name == slot_name(HOST, (5, 6)))
    assert kind.summary(b, t) == f"{HV}/vm5\n{HV}/vm6"
    view = kind.node_view(b, t)
    assert view["ports"] == [] and [(p["name"], p["gpu"]) for p in view["vm_ports"]] == [("vm5", 5), ("vm6", 6)]
    assert kind.node_view(b) == {"ports": []}  # no tenancy: the host is not known here
    assert "vm_ports" not in kind.node_view(t.nodes[0], t)  # the host itself: its own entries
