"""Segment pools and the segmentation-id <-> PKey mapping: validation names the offending range.

config.yaml's ``segments:`` is split by kind name: each registered kind parses and validates its own
section (the Ethernet kind's VLANs, the InfiniBand kind's pool and mapping) and the core checks the
ranges they claim against ``user_vlan_range`` and each other (``parse_segments``: the registered kinds)."""

from __future__ import annotations

from typing import Any

import pytest

from gpufabric.domain.errors import ConfigError, ExhaustedError
from gpufabric.domain.segments import IdRange, allocate
from gpufabric.domain.values import PKey
from gpufabric.fabrics.infiniband.segments import IbSegments, MappingMode
from gpufabric.store.registry import parse_segments


def test_default_config_is_valid_and_offset_maps_both_ways() -> None:
    cfg = parse_segments()
    ib = cfg.of(IbSegments).pool
    assert ib.mode is MappingMode.OFFSET
    assert ib.pkey_for(3000) == PKey(0x0A00)
    assert ib.pkey_for(3999) == PKey(0x0A00 + 999)
    assert ib.seg_for(PKey(0x0A05)) == 3005
    assert not ib.seg_range.overlaps(cfg.user_vlans)


def test_table_mode_maps_both_ways() -> None:
    cfg = parse_segments(
        {
            "infiniband": {
                "seg_range": "3000-3009",
                "mapping": {"mode": "table", "table": {3000: "0x8001", 3001: "0x0042"}},
            }
        }
    )
    ib = cfg.of(IbSegments).pool
    assert ib.pkey_for(3001) == PKey(0x42)
    assert ib.pkey_for(3000) == PKey(0x0001)
    assert ib.seg_for(PKey(0x42)) == 3001
    assert ib.seg_ids() == [3000, 3001]
    with pytest.raises(ConfigError, match="infiniband.seg_id"):
        ib.pkey_for(3005)


BAD: list[tuple[str, dict[str, Any], str, str]] = [
    ("ib-range-overlaps-user-vlans", {"infiniband": {"seg_range": "1500-2500"}}, "infiniband.seg_range", "1500-2500"),
    (
        "ib-range-overlaps-eth-pool",
        {"user_vlan_range": "2-99", "infiniband": {"seg_range": "2500-3500"}},
        "infiniband.seg_range",
        "2500-3500",
    ),
    ("eth-pool-overlaps-user", {"ethernet": {"vlan_range": "1000-2999"}}, "ethernet.vlan_range", "1000-2999"),
    ("eth-pool-beyond-4094", {"ethernet": {"vlan_range": "2000-5000"}}, "ethernet.vlan_range", "2000-5000"),
    ("offset-runs-past-7ffe", {"infiniband": {"mapping": {"base": "0x7f00"}}}, "infiniband.mapping.base", "0x7f00"),
    ("offset-base-reserved", {"infiniband": {"mapping": {"base": "0x7fff"}}}, "infiniband.mapping.base", "0x7fff"),
    (
        "quarantine-vlan-1",
        {"user_vlan_range": "2-1999", "ethernet": {"quarantine_vlan": 1}},
        "ethernet.quarantine_vlan",
        "never VLAN 1",
    ),
    ("quarantine-vlan-4095", {"ethernet": {"quarantine_vlan": 4095}}, "ethernet.quarantine_vlan", "1-4094"),
    ("quarantine-in-pool", {"ethernet": {"quarantine_vlan": 2500}}, "ethernet.quarantine_vlan", "2500"),
    (
        "table-duplicate-pkey",
        {"infiniband": {"mapping": {"mode": "table", "table": {3000: "0x10", 3001: "0x10"}}}},
        "infiniband.mapping.table",
        "0x0010",
    ),
    (
        "table-pkey-reserved",
        {"infiniband": {"mapping": {"mode": "table", "table": {3000: "0x7fff"}}}},
        "infiniband.mapping.table[3000]",
        "0x7fff",
    ),
    (
        "table-seg-outside-range",
        {"infiniband": {"mapping": {"mode": "table", "table": {42: "0x10"}}}},
        "infiniband.mapping.table",
        "42",
    ),
    ("bad-mode", {"infiniband": {"mapping": {"mode": "magic"}}}, "infiniband.mapping.mode", "offset or table"),
    ("range-reversed", {"infiniband": {"seg_range": "3999-3000"}}, "infiniband.seg_range", "3999-3000"),
    ("range-garbage", {"user_vlan_range": "a-b"}, "user_vlan_range", "START-END"),
    ("user-range-has-vlan-1", {"user_vlan_range": "1-1999"}, "user_vlan_range", "never VLAN 1"),
    (
        "eth-pool-has-vlan-1",
        {"user_vlan_range": "2000-2999", "ethernet": {"vlan_range": "1-999"}},
        "ethernet.vlan_range",
        "never VLAN 1",
    ),
    (
        "ib-range-has-vlan-1",
        {"user_vlan_range": "100-1999", "infiniband": {"seg_range": "1-50"}},
        "infiniband.seg_range",
        "never VLAN 1",
    ),
    ("ib-range-beyond-4094", {"infiniband": {"seg_range": "4000-5000"}}, "infiniband.seg_range", "1-4094"),
    ("eth-pool-overlaps-ib", {"ethernet": {"vlan_range": "2000-3100"}}, "infiniband.seg_range", "2000-3100"),
]


@pytest.mark.parametrize(("raw", "field", "mention"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_invalid_config_names_field_and_range(raw: dict[str, Any], field: str, mention: str) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_segments(raw)
    assert ei.value.field.startswith(field)
    assert mention in str(ei.value)
    assert "\n" not in str(ei.value)


def test_idrange_basics() -> None:
    r = IdRange(10, 19)
    assert len(r) == 10 and 10 in r and 19 in r and 20 not in r
    assert r.overlaps(IdRange(19, 30)) and not r.overlaps(IdRange(20, 30))


def test_allocate_lowest_free_and_exhaustion() -> None:
    assert allocate(range(5, 10), {5, 6, 8}, "pool") == 7
    with pytest.raises(ExhaustedError, match="pool"):
        allocate(range(5, 7), {5, 6}, "pool")
