"""Desired state from leases, and plan(desired, observed) as values."""

from __future__ import annotations

from datetime import UTC, datetime

from gpufabric.domain.models import QUARANTINE, EthernetPort, Fabric, IbPort, Lease, Network, Node, Segment
from gpufabric.domain.state import (
    EthernetPortConfig,
    FabricState,
    IbFabricState,
    PkeyTable,
    PortMode,
    SwitchState,
)
from gpufabric.domain.values import Guid, PKey, VlanId
from gpufabric.planning.desired import derive_desired
from gpufabric.planning.plan import PkeyAction, plan

T0 = datetime(2026, 1, 1, tzinfo=UTC)
Q = VlanId(4000)


def node(i: int) -> Node:
    name = f"gpu-a{i:02d}"
    return Node(
        name,
        ethernet=(EthernetPort(name, "eth0", "leaf1", f"p{i}"),),
        ib=tuple(IbPort(name, f"mlx5_{k}", 1, Guid(0x1000 + i * 16 + k), Guid(0x2000 + i * 16 + k)) for k in range(2)),
    )


NODES = [node(1), node(2), node(3)]
NETS = [
    Network(
        "a-net",
        "ta",
        (Segment(Fabric.ETHERNET, 2000, vlan=VlanId(2000)), Segment(Fabric.INFINIBAND, 3000, pkey=PKey(0x0A00))),
    ),
    Network("a-net2", "ta", (Segment(Fabric.ETHERNET, 2002, vlan=VlanId(2002)),)),
    Network(
        "b-net",
        "tb",
        (Segment(Fabric.ETHERNET, 2001, vlan=VlanId(2001)), Segment(Fabric.INFINIBAND, 3001, pkey=PKey(0x0A01))),
    ),
]
LEASES = [Lease("ta", "gpu-a01", T0, networks=("a-net",)), Lease("tb", "gpu-a02", T0, networks=("b-net",))]


def test_desired_puts_leased_ports_on_tenant_vlans_and_pkeys_and_others_in_quarantine() -> None:
    d = derive_desired(NODES, LEASES, NETS, sm_port_guids=[Guid(0x99)])
    sw = d.switch("leaf1")
    assert sw is not None
    assert sw.port("p1") == EthernetPortConfig("leaf1", "p1", PortMode.ACCESS, VlanId(2000))
    assert sw.port("p2") == EthernetPortConfig("leaf1", "p2", PortMode.ACCESS, VlanId(2001))
    assert sw.port("p3") == EthernetPortConfig("leaf1", "p3", PortMode.SHUTDOWN)
    parts = {p.pkey.value: p.full_members() for p in d.ib.partitions}
    assert parts == {0x0A00: {Guid(0x1010), Guid(0x1011)}, 0x0A01: {Guid(0x1020), Guid(0x1021)}}
    assert d.ib.default_full == (Guid(0x99),)
    assert dict(d.owners) == {"gpu-a01": "ta", "gpu-a02": "tb", "gpu-a03": QUARANTINE}


def test_override_sends_a_leased_node_to_quarantine_on_every_fabric() -> None:
    d = derive_desired(NODES, LEASES, NETS, overrides={"gpu-a01": QUARANTINE})
    sw = d.switch("leaf1")
    assert sw is not None and sw.port("p1") == EthernetPortConfig("leaf1", "p1", PortMode.SHUTDOWN)
    assert {p.pkey.value for p in d.ib.partitions} == {0x0A01}
    assert d.owner("gpu-a01") == QUARANTINE


def test_unleased_ports_are_quarantined_never_vlan1_or_untagged() -> None:
    d = derive_desired(NODES, [], NETS)
    sw = d.switch("leaf1")
    assert sw is not None
    assert {p.mode for p in sw.ports} == {PortMode.SHUTDOWN}
    assert all(p.vlans() == frozenset() for p in sw.ports)


def test_two_networks_make_a_trunk_with_only_those_vlans() -> None:
    d = derive_desired(NODES, [Lease("ta", "gpu-a01", T0, networks=("a-net", "a-net2"))], NETS)
    sw = d.switch("leaf1")
    assert sw is not None
    assert sw.port("p1") == EthernetPortConfig("leaf1", "p1", PortMode.TRUNK, None, (VlanId(2000), VlanId(2002)))


def test_plan_lists_only_differences_and_removes_before_adds() -> None:
    d = derive_desired(NODES, LEASES, NETS)
    # observed: p1 still on quarantine; p2 already right; gpu-a01's ports still in tb's key
    observed = FabricState(
        switches=(
            SwitchState(
                "leaf1",
                (
                    EthernetPortConfig("leaf1", "p1", PortMode.ACCESS, Q),
                    EthernetPortConfig("leaf1", "p2", PortMode.ACCESS, VlanId(2001)),
                    EthernetPortConfig("leaf1", "p3", PortMode.SHUTDOWN),
                ),
            ),
        ),
        ib=IbFabricState(
            tables=(
                PkeyTable(Guid(0x1010), (0x7FFF, 0x8A01)),
                PkeyTable(Guid(0x1011), (0x7FFF,)),
                PkeyTable(Guid(0x1020), (0x7FFF, 0x8A01)),
                PkeyTable(Guid(0x1021), (0x7FFF, 0x8A01)),
            )
        ),
    )
    guids = [p.port_guid for n in NODES for p in n.ib]
    p = plan(d, observed, guids)
    assert [(c.after.port, c.after.vlan) for c in p.ethernet] == [("p1", VlanId(2000))]
    assert [(c.action, c.pkey, c.guid) for c in p.ib] == [
        (PkeyAction.REMOVE, 0x0A01, Guid(0x1010)),
        (PkeyAction.ADD, 0x0A00, Guid(0x1010)),
        (PkeyAction.ADD, 0x0A00, Guid(0x1011)),
    ]
    assert p.ib_layout == d.ib
    assert "leaf1/p1: access 4000 -> access 2000" in str(p)


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
    observed = FabricState(switches=d.switches, ib=IbFabricState(tables=tables))
    p = plan(d, observed, [p.port_guid for n in NODES for p in n.ib])
    assert p.empty and p.ib_layout is None and str(p) == "no changes"


def test_ports_the_fabric_does_not_show_are_left_out_of_the_layout() -> None:
    d = derive_desired(NODES, LEASES, NETS)
    # gpu-a01's ports are gone from the fabric (e.g. its switch port was disabled)
    observed = FabricState(
        ib=IbFabricState(tables=(PkeyTable(Guid(0x1020), (0x7FFF,)), PkeyTable(Guid(0x1021), (0x7FFF,))))
    )
    p = plan(d, observed, [p.port_guid for n in NODES for p in n.ib])
    assert p.ib_layout is not None
    assert {q.pkey.value: q.full_members() for q in p.ib_layout.partitions} == {0x0A01: {Guid(0x1020), Guid(0x1021)}}
    assert {c.guid for c in p.ib} == {Guid(0x1020), Guid(0x1021)}
