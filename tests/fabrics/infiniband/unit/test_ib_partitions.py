"""partitions.conf rendering and parsing: determinism, refusals, round trip, hand-written forms."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufabric.domain.errors import CapacityError, ValidationError
from gpufabric.domain.values import Guid, Membership, PKey
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember
from gpufabric.fabrics.infiniband.state.partitions import (
    changed_ports,
    check_partition_name,
    entries_by_port,
    expected_entries,
    normalize_layout,
    parse_partitions_conf,
    partition_name,
    render_partitions_conf,
)

from support.ports import port_node
from support.segments import segment

FIX = Path(__file__).parents[3] / "fixtures" / "opensm"
SM = Guid(0x0002C90310000001)
A1, A2, B1, B2 = (Guid(0x0002C90310000000 | n << 8 | 1) for n in (1, 2, 3, 4))


def two_tenants() -> PartitionLayout:
    return PartitionLayout(
        (
            Partition("tenant-b", PKey(0x0B01), (PartitionMember(B2), PartitionMember(B1)), ipoib=True),
            Partition("tenant-a", PKey(0x0A01), (PartitionMember(A2), PartitionMember(A1))),
        )
    )


def test_render_two_tenants_exact_text() -> None:
    text = render_partitions_conf(two_tenants(), [SM])
    assert text.splitlines()[1:] == [
        "Default=0x7fff, ipoib :",
        "ALL_CAS=limited,",
        "ALL_SWITCHES=full,",
        "SELF=full,",
        "0x0002c90310000001=full ;",
        "tenant-a=0x0a01 :",
        "0x0002c90310000101=full,",
        "0x0002c90310000201=full ;",
        "tenant-b=0x0b01, ipoib :",
        "0x0002c90310000301=full,",
        "0x0002c90310000401=full ;",
    ]
    assert text == (FIX / "partitions.two-tenants.conf").read_text()  # what the recorded OpenSM accepted


def test_render_is_order_independent() -> None:
    a = two_tenants()
    b = PartitionLayout(tuple(reversed(a.partitions)))
    assert render_partitions_conf(a, [SM]) == render_partitions_conf(b, [SM])


def test_empty_partition_and_limited_member() -> None:
    layout = PartitionLayout(
        (Partition("spare", PKey(0x0C01)), Partition("x", PKey(0x0D01), (PartitionMember(A1, Membership.LIMITED),)))
    )
    text = render_partitions_conf(layout)
    assert "spare=0x0c01 : ;" in text
    assert "0x0002c90310000101=limited ;" in text


@pytest.mark.parametrize(
    ("layout", "field"),
    [
        (PartitionLayout((Partition("a", PKey(1)), Partition("b", PKey(1)))), "pkey"),
        (PartitionLayout((Partition("a", PKey(1)), Partition("A", PKey(2)))), "partition_name"),
        (PartitionLayout((Partition("Default", PKey(1)),)), "partition_name"),
        (PartitionLayout((Partition("has space", PKey(1)),)), "partition_name"),
        (PartitionLayout((Partition("a:b", PKey(1)),)), "partition_name"),
        (PartitionLayout((Partition("1abc", PKey(1)),)), "partition_name"),
        (PartitionLayout((Partition("x" * 32, PKey(1)),)), "partition_name"),
    ],
    ids=["dup-key", "dup-name-case", "reserved-name", "space", "colon", "digit-first", "too-long"],
)
def test_render_refuses(layout: PartitionLayout, field: str) -> None:
    with pytest.raises(ValidationError) as ei:
        render_partitions_conf(layout)
    assert ei.value.field == field


def test_reserved_key_cannot_even_be_built() -> None:
    with pytest.raises(ValidationError):
        Partition("a", PKey(0x7FFF))


def _n_partitions(n: int, guid: Guid) -> PartitionLayout:
    return PartitionLayout(tuple(Partition(f"p{i}", PKey(i), (PartitionMember(guid),)) for i in range(1, n + 1)))


def test_capacity_default_slot_counts() -> None:
    render_partitions_conf(_n_partitions(63, A1))  # 63 + default = 64: fits
    with pytest.raises(CapacityError) as ei:
        render_partitions_conf(_n_partitions(64, A1))
    assert ei.value.device == str(A1)
    assert ei.value.fields["needed"] == 65
    assert ei.value.fields["capacity"] == 64


def test_capacity_per_port_map() -> None:
    with pytest.raises(CapacityError):
        render_partitions_conf(_n_partitions(8, A1), capacity={A1: 8})
    render_partitions_conf(_n_partitions(8, A2), capacity={A1: 8})


@pytest.mark.parametrize(
    ("network", "expected"),
    [("tenant-a", "tenant-a"), ("acme.h100_net-1", "acme.h100_net-1")],
    ids=["plain", "dots"],
)
def test_partition_name_keeps_valid(network: str, expected: str) -> None:
    assert partition_name(network) == expected


@pytest.mark.parametrize("network", ["8x-h100", "a" * 40, "café net", "default"], ids=["digit", "long", "utf8", "dflt"])
def test_partition_name_makes_valid_and_stable(network: str) -> None:
    name = partition_name(network)
    assert check_partition_name(name) == name
    assert partition_name(network) == name
    assert name != partition_name(network + "x")


def test_round_trip_rendered() -> None:
    text = render_partitions_conf(two_tenants(), [SM])
    assert parse_partitions_conf(text) == normalize_layout(two_tenants(), [SM])


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        ("Default=0x7fff : ALL=limited, SELF=full ;\nt=0x0a01 : 0x0002c90310000101=full ;\n", {0x0A01}),
        ("Default=0x7fff:ALL=limited;t=0x8a01:0x2c90310000101=full;u=0xb01:0x2c90310000201;\n", {0x0A01, 0x0B01}),
        (
            "# comment\nt=2561, ipoib, mtu=4 : # trailing\n  0x2c90310000101 = full ,\n 0x2c90310000201=full ;\n",
            {0x0A01},
        ),
        ("t=0x0a01 : 0x2c90310000101=full\n", {0x0A01}),  # last definition without ';' is accepted by OpenSM
        ("t=0x0a01, defmember=full : 0x2c90310000101 ;\n", {0x0A01}),
    ],
    ids=["one-line", "packed", "multi-line-flags-decimal", "unterminated", "defmember"],
)
def test_parse_hand_written(text: str, keys: set[int]) -> None:
    layout = parse_partitions_conf(text)
    assert {p.pkey.value for p in layout.partitions} == keys
    assert A1 in layout.partitions[0].full_members()


def test_parse_default_policy() -> None:
    layout = parse_partitions_conf("Default=0x7fff : ALL_CAS=limited, SELF=full, 0x2c90310000001=full ;\n")
    assert layout.partitions == ()
    assert layout.default_full == (SM,)
    assert layout.default_limited_all is True
    assert parse_partitions_conf("Default=0x7fff : SELF=full ;\n").default_limited_all is False


@pytest.mark.parametrize(
    "text",
    [
        "Default=0x7fff : ALL=limited\n;\n",  # a line starting with ';' (PARSE ERROR measured)
        "bad line here\n",
        "t=0x0a01 : 0xzz=full ;\n",
        "t=0x0a01 : ALL=full ;\n",  # keyword member in a tenant partition
        "t=zz : 0x1=full ;\n",
        "t=0x0a01 : " + ",".join(f"0x{i:016x}=full" for i in range(1, 300)) + " ;\n",  # > 4096 bytes
    ],
    ids=["leading-semicolon", "no-definition", "bad-guid", "keyword-member", "bad-key", "long-line"],
)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(ValidationError) as ei:
        parse_partitions_conf(text)
    assert ei.value.field == "partitions.conf"


def test_expected_entries() -> None:
    layout = normalize_layout(two_tenants(), [SM])
    assert expected_entries(layout, A1) == {0x7FFF, 0x8A01}
    assert expected_entries(layout, SM) == {0xFFFF}
    assert expected_entries(layout, Guid(0x1234)) == {0x7FFF}


guids = st.integers(min_value=1, max_value=2**64 - 1).map(Guid)
names = st.from_regex(r"[A-Za-z][A-Za-z0-9_.-]{0,30}", fullmatch=True).filter(lambda s: s.lower() != "default")


@st.composite
def layouts(draw: st.DrawFn) -> PartitionLayout:
    n = draw(st.integers(0, 6))
    keys = draw(st.lists(st.integers(PKey.MIN, PKey.MAX), min_size=n, max_size=n, unique=True))
    nms = draw(st.lists(names, min_size=n, max_size=n, unique_by=str.lower))
    parts = tuple(
        Partition(
            nm,
            PKey(k),
            tuple(draw(st.lists(st.builds(PartitionMember, guids, st.sampled_from(Membership)), max_size=5))),
            draw(st.booleans()),
        )
        for nm, k in zip(nms, keys, strict=True)
    )
    return PartitionLayout(parts, tuple(draw(st.lists(guids, max_size=3))), draw(st.booleans()))


@settings(max_examples=200, deadline=None)
@given(layouts())
def test_round_trip_property(layout: PartitionLayout) -> None:
    text = render_partitions_conf(layout, [SM])
    assert parse_partitions_conf(text) == normalize_layout(layout, [SM])
    assert render_partitions_conf(parse_partitions_conf(text)) == text


@settings(max_examples=100, deadline=None)
@given(layouts())
def test_entries_by_port_matches_expected_entries(layout: PartitionLayout) -> None:
    norm = normalize_layout(layout, [SM])
    by_port = entries_by_port(norm)
    for g in by_port:
        assert by_port[g] == expected_entries(norm, g)


def test_changed_ports_only_the_moved_node() -> None:
    old = normalize_layout(two_tenants(), [SM])
    moved = PartitionLayout(
        (
            Partition("tenant-a", PKey(0x0A01), (PartitionMember(A1),)),
            Partition("tenant-b", PKey(0x0B01), (PartitionMember(A2), PartitionMember(B1), PartitionMember(B2)), True),
        ),
        (SM,),
    )
    assert changed_ports(old, moved) == {A2}
    assert changed_ports(None, moved) == {A1, A2, B1, B2, SM}


def test_tenant_partitions_are_rendered_with_ipoib() -> None:
    """Regression: tenant partitions were rendered without ``ipoib``, so OpenSM made no
    broadcast group and an IPoIB child interface on the tenant PKey never came up."""
    from datetime import UTC, datetime

    from gpufabric.domain.fabric import Tenancy
    from gpufabric.domain.models import Lease, Network
    from gpufabric.fabrics.infiniband.entries import IbPort
    from gpufabric.fabrics.infiniband.plan import desired_ib

    g = Guid(0x0002C90310000101)
    net = Network("n", "alpha", (segment("infiniband", 3000, pkey=PKey(0x0A00)),))
    node = port_node("gpu-a01", ib=(IbPort("gpu-a01", "mlx5_0", 1, g, g),))
    lease = Lease("alpha", "gpu-a01", datetime(2026, 1, 1, tzinfo=UTC), networks=("n",))
    layout = desired_ib(Tenancy((node,), {"gpu-a01": lease}, {("alpha", "n"): net}), ()).layout
    assert [(p.pkey.value & 0x7FFF, p.ipoib) for p in layout.partitions] == [(0x0A00, True)]
    assert "pk_0a00=0x0a00, ipoib :" in render_partitions_conf(layout)
