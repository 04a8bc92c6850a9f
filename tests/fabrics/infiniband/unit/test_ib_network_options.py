"""A network's own IPoIB settings on an InfiniBand subnet (issue 20, item 4), pure: validated
(one-line error naming ``options.<instance>.<key>`` and its range), carried by the segment into
the partition, rendered into that partition's partitions.conf flags over the subnet's, checked
in the read-back (the group's MTU and rate), and refused by the UFM driver, which sends
``ip_over_ib`` only."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.models import Lease, Network
from gpufabric.domain.values import Guid, PKey
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.infiniband.drivers.ufm.driver import UfmDriver
from gpufabric.fabrics.infiniband.drivers.ufm.plan import parse_ufm_pkey, plan_ufm
from gpufabric.fabrics.infiniband.entries import IbPort
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember
from gpufabric.fabrics.infiniband.state.ipoib import (
    IpoibOptions,
    McGroup,
    group_qos,
    parse_sa_dump_groups,
    wrong_groups,
)
from gpufabric.fabrics.infiniband.state.partitions import render_partitions_conf
from gpufabric.planning.desired import tenancy_of

from support.ports import port_node
from support.segments import segment

FIX = Path(__file__).parents[3] / "fixtures" / "infiniband-diags"
G1, G2 = Guid(0x0002C90310000101), Guid(0x0002C90310000201)


def test_options_are_validated_naming_the_key_and_its_range() -> None:
    ib = InfinibandKind().bind("ib-compute")
    where = "options.ib-compute"
    assert ib.segment_options({"rate": 7, "mtu": 5, "ipoib": True}, where) == (("ipoib", True), ("mtu", 5), ("rate", 7))
    assert ib.segment_options({}, where) == ()
    cases = [
        ({"mtu": 6}, "options.ib-compute.mtu", "an integer 1-5"),
        ({"mtu": True}, "options.ib-compute.mtu", "an integer 1-5"),
        ({"sl": "3"}, "options.ib-compute.sl", "an integer 0-15"),
        ({"ipoib": "no"}, "options.ib-compute.ipoib", "true or false"),
        ({"speed": 1}, "options.ib-compute.speed", "one of the keys ipoib, mtu, rate, sl, scope"),
    ]
    for raw, field, allowed in cases:
        with pytest.raises(ValidationError) as e:
            ib.segment_options(raw, where)
        assert (e.value.field, e.value.allowed) == (field, allowed), raw
        assert "\n" not in str(e.value)


def test_a_kind_without_network_options_refuses_any() -> None:
    eth = EthernetKind().bind("eth-a")
    assert eth.segment_options({}, "options.eth-a") == ()
    with pytest.raises(ValidationError) as e:
        eth.segment_options({"mtu": 9000}, "options.eth-a")
    assert e.value.field == "options.eth-a" and e.value.allowed == "no options on fabric eth-a"


def layout_for(options: tuple[tuple[str, int | bool], ...]) -> PartitionLayout:
    """The desired layout of one node leased with a network whose IB segment has ``options``."""
    node = port_node("gpu-a01", ib=(IbPort("gpu-a01", "mlx5_0", 1, G1, Guid(0x0002C90310000100)),))
    net = Network("n1", "ta", (segment("infiniband", 3001, pkey=PKey(0x0A01), options=options),))
    lease = Lease("ta", "gpu-a01", datetime(2026, 1, 1, tzinfo=UTC), None, ("n1",))
    return InfinibandKind().desired(tenancy_of([node], [lease], [net])).layout


def test_the_networks_options_reach_its_partition_and_its_flags() -> None:
    plain = layout_for(())
    assert [(p.ipoib, p.qos) for p in plain.partitions] == [(True, ())]
    tuned = layout_for((("mtu", 5), ("rate", 16), ("sl", 3)))
    assert [(p.ipoib, p.qos) for p in tuned.partitions] == [(True, (("mtu", 5), ("rate", 16), ("sl", 3)))]
    text = render_partitions_conf(tuned, ipoib=IpoibOptions(mtu=4, scope=2))
    assert "pk_0a01=0x0a01, ipoib, mtu=5, rate=16, sl=3, scope=2 :" in text  # the network's over the subnet's
    off = layout_for((("ipoib", False),))
    assert [p.ipoib for p in off.partitions] == [False]
    assert "pk_0a01=0x0a01 :" in render_partitions_conf(off)
    assert "pk_0a01=0x0a01 :" in render_partitions_conf(tuned, ipoib=IpoibOptions(enabled=False))  # subnet off


def test_the_read_back_checks_the_groups_mtu_and_rate_where_asked() -> None:
    layout = PartitionLayout((
        Partition("a", PKey(0x0A01), (PartitionMember(G1),), ipoib=True),
        Partition("b", PKey(0x0A02), (PartitionMember(G2),), ipoib=True, qos=(("rate", 7),)),
        Partition("c", PKey(0x0A03), (PartitionMember(G2),), ipoib=False, qos=(("rate", 3),)),
    ))  # fmt: skip
    assert group_qos(IpoibOptions(), layout) == {0x0A02: {"rate": 7}}
    assert group_qos(IpoibOptions(mtu=4), layout) == {0x0A01: {"mtu": 4}, 0x0A02: {"mtu": 4, "rate": 7}}
    groups = parse_sa_dump_groups((FIX / "opensm-sa.dump.txt").read_text())  # recorded: 0x0a02 made with rate=7
    assert wrong_groups({0x0A02: {"rate": 7}}, groups) == []
    assert wrong_groups({0x0A01: {"rate": 7}}, groups) == ["ff12:401b:8a01::ffff:ffff rate 3 (asked 7)"]
    assert wrong_groups({0x0A01: {"mtu": 4}}, groups) == []  # MTU 0x84: selector 2, code 4
    assert wrong_groups({0x0A01: {"mtu": 5}}, [McGroup("ff12:401b:8a01::ffff:ffff", 0xC001, 0x8A01, 0x84, 0x83)]) == [
        "ff12:401b:8a01::ffff:ffff mtu 4 (asked 5)"
    ]


def test_ufm_refuses_a_partitions_own_mtu_or_scope_before_any_call() -> None:
    drv = UfmDriver.__new__(UfmDriver)
    drv.ipoib = IpoibOptions()
    for qos in ((("mtu", 5),), (("rate", 16), ("scope", 5))):
        layout = PartitionLayout((Partition("pk_0a01", PKey(0x0A01), (PartitionMember(G1),), True, qos),))
        with pytest.raises(ConfigError) as e:
            drv.plan(layout)
        assert e.value.field == "network options of partition pk_0a01" and "no MTU encoding" in e.value.allowed


def test_ufm_plans_a_partitions_own_sl_and_rate_as_a_create_with_qos_first() -> None:
    w = Partition("pk_0a01", PKey(0x0A01), (PartitionMember(G1),), True, (("rate", 16), ("sl", 3)))
    calls = plan_ufm(PartitionLayout((w,)), [])
    assert [c.request() for c in calls] == [
        ("POST", "/resources/pkeys/add",
         {"pkey": "0xa01", "index0": False, "ip_over_ib": True, "rate_limit": 100.0, "service_level": 3}),
        ("POST", "/resources/pkeys",
         {"pkey": "0xa01", "guids": [f"{G1.value:016x}"], "membership": "full", "index0": False, "ip_over_ib": True}),
    ]  # fmt: skip
    plain = Partition("pk_0a01", PKey(0x0A01), (PartitionMember(G1),), True)
    assert [c.op.value for c in plan_ufm(PartitionLayout((plain,)), [])] == ["add_guids"]  # no qos: no create
    reported = parse_ufm_pkey(0x0A01, {"partition": "x", "ip_over_ib": True, "service_level": 3, "rate_limit": 100,
                                       "guids": [{"guid": f"{G1.value:016x}", "membership": "full"}]})  # fmt: skip
    assert reported is not None and reported.qos == (("rate", 16), ("sl", 3))
    assert plan_ufm(PartitionLayout((w,)), [reported]) == ()  # as asked: nothing to do
    other = dataclasses.replace(reported, qos=(("rate", 7), ("sl", 3)))
    assert [c.op.value for c in plan_ufm(PartitionLayout((w,)), [other])] == ["delete_pkey", "create_pkey", "add_guids"]
    silent = dataclasses.replace(reported, qos=())  # a UFM that reports no QoS: not checked, not re-created
    assert plan_ufm(PartitionLayout((w,)), [silent]) == ()
