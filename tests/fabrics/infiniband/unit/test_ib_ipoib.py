"""IPoIB on tenant partitions (pure): options, rendering, the parsers of what OpenSM made,
the multicast-LID budget, and the kind's allocation limit.

Recorded outputs (tests/fixtures/infiniband-diags/, OpenSM 3.3.23 + ibsim, partitions
0x0a01 ipoib, 0x0a02 ipoib rate=7, 0x0a03 without the flag):
``saquery-g.tenant-member.txt`` run as gpu-a01 (member of 0x0a01), ``saquery-g.sm-port.txt``
as the SM node (OpenSM hides groups whose PKey the requester lacks), ``opensm-sa.dump.txt``
(sa_db_dump TRUE) and ``smpquery-switchinfo.txt`` of a leaf switch.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufabric.domain.errors import CapacityError, ConfigError, ExhaustedError
from gpufabric.domain.models import Network
from gpufabric.domain.values import Guid, PKey
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.fabrics.infiniband.segments import IbSegments
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember
from gpufabric.fabrics.infiniband.state.ipoib import (
    IPOIB_PARTITION_LIMIT,
    IpoibOptions,
    McGroup,
    broadcast_mgid,
    check_mcast_budget,
    missing_groups,
    parse_mcast_fdb_cap,
    parse_sa_dump_groups,
    parse_saquery_groups,
    stale_groups,
)
from gpufabric.fabrics.infiniband.state.partitions import parse_partitions_conf, render_partitions_conf
from gpufabric.store.registry import parse_segments

from support.segments import segment

FIX = Path(__file__).parents[3] / "fixtures" / "infiniband-diags"
G1 = Guid(0x0002C90310000101)


def test_saquery_groups_parsed_from_a_members_real_output() -> None:
    groups = parse_saquery_groups((FIX / "saquery-g.tenant-member.txt").read_text())
    assert groups == (
        McGroup("ff12:401b:8a01::ffff:ffff", 0xC001, 0x8A01, 0x84, 0x83, 0),
        McGroup("ff12:401b:ffff::ffff:ffff", 0xC000, 0xFFFF, 0x84, 0x83, 0),
    )
    sm_view = parse_saquery_groups((FIX / "saquery-g.sm-port.txt").read_text())
    assert [g.mgid for g in sm_view] == ["ff12:401b:ffff::ffff:ffff"]  # the SM port sees no tenant group


def test_sa_dump_groups_parsed_and_checked() -> None:
    groups = parse_sa_dump_groups((FIX / "opensm-sa.dump.txt").read_text())
    assert [(g.mgid, g.mlid, g.pkey, g.rate) for g in groups] == [
        ("ff12:401b:8a01::ffff:ffff", 0xC001, 0x8A01, 0x83),
        ("ff12:401b:8a02::ffff:ffff", 0xC002, 0x8A02, 0x87),  # rate=7 reached the group
        ("ff12:401b:ffff::ffff:ffff", 0xC000, 0xFFFF, 0x83),
    ]
    assert missing_groups([0x0A01, 0x0A02], groups) == []
    assert missing_groups([0x0A01, 0x0A03], groups) == ["ff12:401b:8a03::ffff:ffff"]  # no ipoib flag, no group
    assert stale_groups([0x0A01], groups) == ["ff12:401b:8a02::ffff:ffff"]
    assert stale_groups([0x0A01, 0x0A02], groups) == []


def test_mcast_fdb_cap_from_real_switchinfo() -> None:
    assert parse_mcast_fdb_cap((FIX / "smpquery-switchinfo.txt").read_text()) == 1024
    assert parse_mcast_fdb_cap("LinearFdbCap:....30720\n") == 0


def test_broadcast_mgid() -> None:
    assert broadcast_mgid(0x0A01) == "ff12:401b:8a01::ffff:ffff"
    assert broadcast_mgid(0x8A01, scope=5) == "ff15:401b:8a01::ffff:ffff"


def test_options_rendered_for_ipoib_partitions() -> None:
    layout = PartitionLayout((Partition("pk_0a00", PKey(0x0A00), (PartitionMember(G1),), ipoib=True),))
    text = render_partitions_conf(layout, ipoib=IpoibOptions(mtu=4, rate=7))
    assert "pk_0a00=0x0a00, ipoib, mtu=4, rate=7 :" in text
    assert parse_partitions_conf(text).partitions[0].ipoib is True
    off = render_partitions_conf(layout, ipoib=IpoibOptions(enabled=False))
    assert "pk_0a00=0x0a00 :" in off


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"mtu": 6}, "infiniband.options.ipoib.mtu"),
        ({"mtu": 0}, "infiniband.options.ipoib.mtu"),
        ({"rate": 1}, "infiniband.options.ipoib.rate"),
        ({"sl": 16}, "infiniband.options.ipoib.sl"),
        ({"scope": 0}, "infiniband.options.ipoib.scope"),
        ({"sl": True}, "infiniband.options.ipoib.sl"),
        ({"enabled": "yes"}, "infiniband.options.ipoib.enabled"),
        ({"qkey": 1}, "infiniband.options.ipoib"),
        ("on", "infiniband.options.ipoib"),
    ],
)
def test_bad_ipoib_options_name_the_field(raw: object, field: str) -> None:
    with pytest.raises(ConfigError) as ei:
        IpoibOptions.parse(raw)
    assert ei.value.field == field
    assert "\n" not in ei.value.message


def test_ipoib_options_parse() -> None:
    assert IpoibOptions.parse(None) == IpoibOptions()
    assert IpoibOptions.parse(False).flags() == ""
    assert IpoibOptions.parse({"mtu": 5, "sl": 0, "scope": 2}).flags() == ", ipoib, mtu=5, sl=0, scope=2"


def test_mcast_budget() -> None:
    check_mcast_budget(1023, 1024)
    check_mcast_budget(5000, 0)  # unknown capacity: not checked here
    with pytest.raises(CapacityError, match="1024 IPoIB partitions need 1025 multicast LIDs.*MulticastFDBCap 1024"):
        check_mcast_budget(1024, 1024)


def test_allocation_refused_before_the_multicast_table_runs_out() -> None:
    cfg = parse_segments(
        {
            "user_vlan_range": "2-9",
            "ethernet": {"vlan_range": "10-19"},
            "infiniband": {"seg_range": "100-3999", "mapping": {"base": "0x0100"}},
        }
    )
    kind = InfinibandKind()
    used = [segment("infiniband", i, pkey=cfg.of(IbSegments).pool.pkey_for(i)) for i in range(100, 100 + IPOIB_PARTITION_LIMIT - 1)]
    seg = kind.allocate(Network("n", "t"), used, cfg)
    assert seg is not None and seg.seg_id == 100 + IPOIB_PARTITION_LIMIT - 1
    with pytest.raises(ExhaustedError, match="multicast LID") as ei:
        kind.allocate(Network("n", "t"), [*used, seg], cfg)
    assert ei.value.fields["limit"] == IPOIB_PARTITION_LIMIT


def test_ufm_gets_ip_over_ib_and_refuses_options_its_api_lacks() -> None:
    from gpufabric.fabrics.infiniband.drivers.ufm.driver import UfmDriver
    from gpufabric.fabrics.infiniband.drivers.ufm.plan import plan_ufm

    layout = PartitionLayout((Partition("pk_0a00", PKey(0x0A00), (PartitionMember(G1),), ipoib=True),))
    calls = plan_ufm(layout, [])
    assert [c.request()[2]["ip_over_ib"] for c in calls if c.request()[2]] == [True]  # type: ignore[index]
    with pytest.raises(ConfigError) as ei:
        UfmDriver("https://ufm.example", token_env="HOME", ipoib={"mtu": 4})
    assert ei.value.field == "infiniband.options.ipoib"
    off = UfmDriver("https://ufm.example", token_env="HOME", ipoib=False)
    assert [p.ipoib for p in off._wanted(layout).partitions] == [False]
