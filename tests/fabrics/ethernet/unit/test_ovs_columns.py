"""The OVS Port column mapping and VLAN policy shared by OVS-backed Ethernet drivers."""

from __future__ import annotations

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.readers.ovs_columns import (
    ALL_VLANS,
    PortColumns,
    check_quarantine_vlan,
    columns_for,
    config_from_columns,
    normalized,
)
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode

Q = VlanId(4000)
SW = "leaf1"


def cfg(mode: PortMode, vlan: int | None = None, trunks: tuple[int, ...] = ()) -> EthernetPortConfig:
    return EthernetPortConfig(SW, "p1", mode, VlanId(vlan) if vlan else None, tuple(VlanId(t) for t in trunks))


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        pytest.param(cfg(PortMode.ACCESS, 100), PortColumns("access", 100, (), False), id="access"),
        pytest.param(cfg(PortMode.TRUNK, None, (300, 200)), PortColumns("trunk", None, (200, 300), False), id="trunk"),
        pytest.param(
            cfg(PortMode.TRUNK, 10, (20, 20)), PortColumns("native-untagged", 10, (20,), False), id="trunk-native"
        ),
        pytest.param(cfg(PortMode.SHUTDOWN), PortColumns("access", 4000, (), True), id="shutdown"),
    ],
)
def test_columns_for(config: EthernetPortConfig, expected: PortColumns) -> None:
    assert columns_for(config, Q) == expected


@pytest.mark.parametrize(
    "config",
    [
        pytest.param(cfg(PortMode.ACCESS, 100), id="access"),
        pytest.param(cfg(PortMode.TRUNK, None, (300, 200)), id="trunk"),
        pytest.param(cfg(PortMode.TRUNK, 10, (20, 30)), id="trunk-native"),
        pytest.param(cfg(PortMode.SHUTDOWN), id="shutdown"),
    ],
)
def test_round_trip(config: EthernetPortConfig) -> None:
    assert config_from_columns(SW, "p1", columns_for(config, Q), Q) == normalized(config)


@pytest.mark.parametrize(
    ("config", "field"),
    [
        pytest.param(cfg(PortMode.ACCESS), "leaf1/p1.vlan", id="access-without-vlan"),
        pytest.param(cfg(PortMode.ACCESS, 1), "leaf1/p1.vlan", id="access-vlan-1"),
        pytest.param(cfg(PortMode.ACCESS, 4000), "leaf1/p1.vlan", id="access-quarantine-vlan"),
        pytest.param(cfg(PortMode.ACCESS, 100, (200,)), "leaf1/p1.trunks", id="access-with-trunks"),
        pytest.param(cfg(PortMode.TRUNK), "leaf1/p1.trunks", id="trunk-empty-means-all"),
        pytest.param(cfg(PortMode.TRUNK, 10), "leaf1/p1.trunks", id="trunk-native-only"),
        pytest.param(cfg(PortMode.TRUNK, None, (100, 1)), "leaf1/p1.trunks", id="trunk-vlan-1"),
        pytest.param(cfg(PortMode.TRUNK, None, (100, 4000)), "leaf1/p1.trunks", id="trunk-quarantine"),
        pytest.param(cfg(PortMode.TRUNK, 1, (100,)), "leaf1/p1.vlan", id="trunk-native-1"),
        pytest.param(cfg(PortMode.SHUTDOWN, 100), "leaf1/p1.vlan", id="shutdown-with-vlan"),
    ],
)
def test_refused(config: EthernetPortConfig, field: str) -> None:
    with pytest.raises(ValidationError) as ei:
        columns_for(config, Q)
    assert ei.value.field == field


@pytest.mark.parametrize(
    ("cols", "expected"),
    [
        pytest.param(PortColumns("", None, (), False), cfg(PortMode.TRUNK, None, ()), id="unconfigured-all-vlans"),
        pytest.param(PortColumns("", 100, (), False), cfg(PortMode.ACCESS, 100), id="tag-only-is-access"),
        pytest.param(PortColumns("access", None, (), False), cfg(PortMode.ACCESS), id="access-no-tag-vlan0"),
        pytest.param(PortColumns("access", 4000, (), False), cfg(PortMode.ACCESS, 4000), id="quarantine-unprotected"),
        pytest.param(PortColumns("access", 100, (), True), cfg(PortMode.ACCESS, 100), id="protected-tenant"),
        pytest.param(
            PortColumns("trunk", 100, (0, 300, 200), False),
            cfg(PortMode.TRUNK, None, (200, 300)),
            id="trunk-ignores-tag-and-0",
        ),
        pytest.param(PortColumns("native-tagged", 5, (6,), False), cfg(PortMode.TRUNK, 5, (6,)), id="native-tagged"),
        pytest.param(PortColumns("dot1q-tunnel", 7, (), False), cfg(PortMode.ACCESS, 7), id="dot1q-tunnel"),
    ],
)
def test_config_from_columns(cols: PortColumns, expected: EthernetPortConfig) -> None:
    got = config_from_columns(SW, "p1", cols, Q)
    if cols.vlan_mode == "" and cols.tag is None:
        assert got.mode is PortMode.TRUNK and got.trunks == ALL_VLANS and len(got.vlans()) == 4094
    else:
        assert got == expected


def test_quarantine_vlan_1_refused() -> None:
    with pytest.raises(ValidationError):
        check_quarantine_vlan(1)
    assert check_quarantine_vlan("4000") == Q
