"""Desired state from leases, and plan(desired, observed) as values."""

from __future__ import annotations

from datetime import UTC, datetime

from gpufabric.domain.models import QUARANTINE, Lease, Network, Node
from gpufabric.domain.state import FabricState
from gpufabric.domain.values import Guid, PKey, VlanId
from gpufabric.fabrics.ethernet.entries import EthernetPort
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.ethernet.plan import EthernetPlan
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState
from gpufabric.fabrics.infiniband.entries import IbPort
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.fabrics.infiniband.plan import IbPlan, PkeyAction, pkey_partition_name
from gpufabric.fabrics.infiniband.state import IbFabricState, PkeyTable
from gpufabric.planning.desired import DesiredState, tenancy_of
from gpufabric.planning.desired import derive_desired as derive
from gpufabric.planning.plan import Plan, merge, plan, tenants_seen

from support.ports import port_node
from support.segments import segment

KINDS = [EthernetKind(), InfinibandKind()]


def derive_desired(
    nodes: list[Node], leases: list[Lease], nets: list[Network], sm_port_guids: list[Guid] = (),  # type: ignore[assignment]
    overrides: dict[str, str] | None = None,
) -> DesiredState:
    settings = {"quarantine_vlan": 4000, "sm_port_guids": tuple(sm_port_guids)}
    return derive(KINDS, tenancy_of(nodes, leases, nets, settings=settings, overrides=overrides))


def sw_of(d: DesiredState, name: str) -> SwitchState | None:
    return next((s for s in d.get("ethernet") if s.switch == name), None)


def eth(p: Plan) -> EthernetPlan:
    e = p.get("ethernet")
    assert isinstance(e, EthernetPlan)
    return e


def ib(p: Plan) -> IbPlan:
    i = p.get("infiniband")
    assert isinstance(i, IbPlan)
    return i

T0 = datetime(2026, 1, 1, tzinfo=UTC)
Q = VlanId(4000)


def node(i: int) -> Node:
    name = f"gpu-a{i:02d}"
    return port_node(
        name,
        ethernet=(EthernetPort(name, "eth0", "leaf1", f"p{i}"),),
        ib=tuple(IbPort(name, f"mlx5_{k}", 1, Guid(0x1000 + i * 16 + k), Guid(0x2000 + i * 16 + k)) for k in range(2)),
    )


NODES = [node(1), node(2), node(3)]
NETS = [
    Network(
        "a-net",
        "ta",
        (segment("ethernet", 2000, vlan=VlanId(2000)), segment("infiniband", 3000, pkey=PKey(0x0A00))),
    ),
    Network("a-net2", "ta", (segment("ethernet", 2002, vlan=VlanId(2002)),)),
    Network(
        "b-net",
        "tb",
        (segment("ethernet", 2001, vlan=VlanId(2001)), segment("infiniband", 3001, pkey=PKey(0x0A01))),
    ),
]
LEASES = [Lease("ta", "gpu-a01", T0, networks=("a-net",)), Lease("tb", "gpu-a02", T0, networks=("b-net",))]


def test_desired_puts_leased_ports_on_tenant_vlans_and_pkeys_and_others_in_quarantine() -> None:
    d = derive_desired(NODES, LEASES, NETS, sm_port_guids=[Guid(0x99)])
    sw = sw_of(d, "leaf1")
    assert sw is not None
    assert sw.port("p1") == EthernetPortConfig("leaf1", "p1", PortMode.ACCESS, VlanId(2000))
    assert sw.port("p2") == EthernetPortConfig("leaf1", "p2", PortMode.ACCESS, VlanId(2001))
    assert sw.port("p3") == EthernetPortConfig("leaf1", "p3", PortMode.SHUTDOWN)
    parts = {p.pkey.value: p.full_members() for p in d.get("infiniband").layout.partitions}
    assert parts == {0x0A00: {Guid(0x1010), Guid(0x1011)}, 0x0A01: {Guid(0x1020), Guid(0x1021)}}
    assert d.get("infiniband").layout.default_full == (Guid(0x99),)
    assert dict(d.owners) == {"gpu-a01": "ta", "gpu-a02": "tb", "gpu-a03": QUARANTINE}


def test_override_sends_a_leased_node_to_quarantine_on_every_fabric() -> None:
    d = derive_desired(NODES, LEASES, NETS, overrides={"gpu-a01": QUARANTINE})
    sw = sw_of(d, "leaf1")
    assert sw is not None and sw.port("p1") == EthernetPortConfig("leaf1", "p1", PortMode.SHUTDOWN)
    assert {p.pkey.value for p in d.get("infiniband").layout.partitions} == {0x0A01}
    assert d.owner("gpu-a01") == QUARANTINE


def test_unleased_ports_are_quarantined_never_vlan1_or_untagged() -> None:
    d = derive_desired(NODES, [], NETS)
    sw = sw_of(d, "leaf1")
    assert sw is not None
    assert {p.mode for p in sw.ports} == {PortMode.SHUTDOWN}
    assert all(p.vlans() == frozenset() for p in sw.ports)


def test_two_networks_make_a_trunk_with_only_those_vlans() -> None:
    d = derive_desired(NODES, [Lease("ta", "gpu-a01", T0, networks=("a-net", "a-net2"))], NETS)
    sw = sw_of(d, "leaf1")
    assert sw is not None
    assert sw.port("p1") == EthernetPortConfig("leaf1", "p1", PortMode.TRUNK, None, (VlanId(2000), VlanId(2002)))


def test_plan_lists_only_differences_and_removes_before_adds() -> None:
    d = derive_desired(NODES, LEASES, NETS)
    # observed: p1 still on quarantine; p2 already right; gpu-a01's ports still in tb's key
    observed = FabricState(slices={
        "ethernet": (
            SwitchState(
                "leaf1",
                (
                    EthernetPortConfig("leaf1", "p1", PortMode.ACCESS, Q),
                    EthernetPortConfig("leaf1", "p2", PortMode.ACCESS, VlanId(2001)),
                    EthernetPortConfig("leaf1", "p3", PortMode.SHUTDOWN),
                ),
            ),
        ),
        "infiniband": IbFabricState(
            tables=(
                PkeyTable(Guid(0x1010), (0x7FFF, 0x8A01)),
                PkeyTable(Guid(0x1011), (0x7FFF,)),
                PkeyTable(Guid(0x1020), (0x7FFF, 0x8A01)),
                PkeyTable(Guid(0x1021), (0x7FFF, 0x8A01)),
            )
        ),
    })
    p = plan(KINDS, d, observed)
    assert [(c.after.port, c.after.vlan) for c in eth(p).changes] == [("p1", VlanId(2000))]
    assert [(c.action, c.pkey, c.guid) for c in ib(p).changes] == [
        (PkeyAction.REMOVE, 0x0A01, Guid(0x1010)),
        (PkeyAction.ADD, 0x0A00, Guid(0x1010)),
        (PkeyAction.ADD, 0x0A00, Guid(0x1011)),
    ]
    assert ib(p).layout == d.get("infiniband").layout
    assert "leaf1/p1: access 4000 -> access 2000" in str(p)
    removals, additions = p.split()
    # access 4000 -> 2000: VLAN 4000 is dropped first (drivers report quarantine as SHUTDOWN, which removes nothing)
    assert [str(c.after.mode) for c in eth(removals).changes] == ["shutdown"]
    assert [(c.action, c.pkey, c.guid) for c in ib(removals).changes] == [(PkeyAction.REMOVE, 0x0A01, Guid(0x1010))]
    layout = ib(removals).layout
    assert layout is not None and all(Guid(0x1010) not in q.full_members() for q in layout.partitions)
    assert [(c.after.port, c.after.vlan) for c in eth(additions).changes] == [("p1", VlanId(2000))]


def test_plan_is_empty_when_observed_equals_desired() -> None:
    d = derive_desired(NODES, LEASES, NETS)
    tables = tuple(
        PkeyTable(
            g,
            (
                0x7FFF,
                *(
                    k | 0x8000
                    for k, mem in (((0x0A00, {0x1010, 0x1011}), (0x0A01, {0x1020, 0x1021})))
                    if g.value in mem
                ),
            ),
        )
        for g in (Guid(x) for x in (0x1010, 0x1011, 0x1020, 0x1021, 0x1030, 0x1031))
    )
    observed = FabricState(slices={"ethernet": d.get("ethernet"), "infiniband": IbFabricState(tables=tables)})
    p = plan(KINDS, d, observed)
    assert p.empty and ib(p).layout is None and str(p) == "no changes"


def test_ports_the_fabric_does_not_show_are_left_out_of_the_layout() -> None:
    d = derive_desired(NODES, LEASES, NETS)
    # gpu-a01's ports are gone from the fabric (e.g. its switch port was disabled)
    observed = FabricState(
        slices={"infiniband": IbFabricState(tables=(PkeyTable(Guid(0x1020), (0x7FFF,)), PkeyTable(Guid(0x1021), (0x7FFF,))))}
    )
    p = plan(KINDS, d, observed)
    layout = ib(p).layout
    assert layout is not None
    assert {q.pkey.value: q.full_members() for q in layout.partitions} == {0x0A01: {Guid(0x1020), Guid(0x1021)}}
    assert {c.guid for c in ib(p).changes} == {Guid(0x1020), Guid(0x1021)}


def test_a_host_that_is_a_full_member_of_the_default_partition_is_drift() -> None:
    d = derive_desired(NODES, [], NETS)
    tables = tuple(PkeyTable(g, (0xFFFF if g == Guid(0x1010) else 0x7FFF,)) for g in (Guid(x) for x in (0x1010, 0x1011, 0x1020, 0x1021, 0x1030, 0x1031)))
    p = plan(KINDS, d, FabricState(slices={"ethernet": d.get("ethernet"), "infiniband": IbFabricState(tables=tables)}))
    assert [(c.action, c.entry, c.guid) for c in ib(p).changes] == [
        (PkeyAction.REMOVE, 0xFFFF, Guid(0x1010)),
        (PkeyAction.ADD, 0x7FFF, Guid(0x1010)),
    ]


def test_partition_names_come_from_the_pkey_not_from_user_names() -> None:
    odd = [Network("a-b", "1acme", (segment("infiniband", 3005, pkey=PKey(0x0A05)),)),
           Network("a_b", "1acme", (segment("infiniband", 3006, pkey=PKey(0x0A06)),))]  # fmt: skip
    d = derive_desired(NODES, [Lease("1acme", "gpu-a01", T0, networks=("a-b", "a_b"))], odd)
    assert [q.name for q in d.get("infiniband").layout.partitions] == ["pk_0a05", "pk_0a06"]
    assert pkey_partition_name(0x8A05) == "pk_0a05"


def test_merge_replaces_only_what_was_read_back_and_tenants_seen_names_every_owner() -> None:
    d = derive_desired(NODES, LEASES, NETS)
    observed = FabricState(slices={"ethernet": d.get("ethernet"), "infiniband": IbFabricState(tables=(PkeyTable(Guid(0x1010), (0x7FFF, 0x8A00)),))})
    read_back = {"ethernet": (SwitchState("leaf1", (EthernetPortConfig("leaf1", "p3", PortMode.ACCESS, VlanId(2001)),)),),
                 "infiniband": IbFabricState(tables=(PkeyTable(Guid(0x1030), (0x7FFF, 0x8A00)),))}  # fmt: skip
    merged = merge(KINDS, observed, read_back)
    ports = {p.port: p for p in merged.get("ethernet")[0].ports}
    assert ports["p3"].vlan == VlanId(2001) and ports["p1"].vlan == VlanId(2000)
    assert {t.port_guid for t in merged.get("infiniband").tables} == {Guid(0x1010), Guid(0x1030)}
    seen = tenants_seen(KINDS, d, merged)
    assert seen["gpu-a01"] == {"ta"}
    assert seen["gpu-a03"] == {"tb", "ta"}  # p3 on tb's VLAN while its HCA holds ta's PKey: split
