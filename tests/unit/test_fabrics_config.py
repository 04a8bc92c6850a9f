"""fabrics.yaml -> driver instances through the entry-point registry; bad entries name the field."""

from __future__ import annotations

from typing import Any

import pytest

from gpufabric.domain.errors import ConfigError, NotFoundError, ValidationError
from gpufabric.domain.values import Guid
from gpufabric.engine.fabrics import Fabrics
from gpufabric.fabrics.ethernet.drivers.ovsdb.driver import OvsdbSwitchDriver
from gpufabric.fabrics.infiniband.drivers.ufm.driver import UfmDriver
from gpufabric.store.registry import Registry

from support import drivers

REG = Registry.from_entry_points()


def test_registry_finds_every_driver_by_entry_point() -> None:
    assert {"ovsdb", "ssh", "opensm", "ufm"} <= set(REG.drivers)
    with pytest.raises(NotFoundError, match="known: "):
        REG.get("nosuch")


def test_builds_switches_sm_and_guids() -> None:
    f = Fabrics.from_config(
        {
            "ethernet": [
                {
                    "driver": "ovsdb",
                    "options": {"switch": f"leaf{i}", "remote": "unix:/x.sock", "quarantine_vlan": 4000},
                }
                for i in (1, 2)
            ],
            "infiniband": {"driver": "ufm", "options": {"url": "https://ufm.example", "token_env": "HOME"}},
            "sm_port_guids": ["0x0002c90300000001"],
        },
        REG,
    )
    assert sorted(drivers.switches(f)) == ["leaf1", "leaf2"]
    assert all(isinstance(d, OvsdbSwitchDriver) for d in drivers.switches(f).values())
    assert isinstance(drivers.sm(f), UfmDriver)
    assert f.settings["sm_port_guids"] == f.settings["trusted_sm_guids"] == (Guid(0x0002C90300000001),)


BAD: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    ("no-driver-key", {"ethernet": [{"options": {}}]}, ConfigError, "ethernet[0]"),
    ("unknown-driver", {"ethernet": [{"driver": "telnet"}]}, NotFoundError, "telnet"),
    (
        "wrong-options",
        {"ethernet": [{"driver": "ovsdb", "options": {"bridge": "x"}}]},
        ConfigError,
        "ethernet[0].options",
    ),
    (
        "sm-as-switch",
        {"ethernet": [{"driver": "ufm", "options": {"url": "https://u", "token_env": "HOME"}}]},
        ConfigError,
        "ethernet[0].driver",
    ),
    ("bad-guid", {"sm_port_guids": ["0xzz"]}, ValidationError, "sm_port_guids"),
]


@pytest.mark.parametrize(("raw", "exc", "mention"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_config(raw: dict[str, Any], exc: type[Exception], mention: str) -> None:
    with pytest.raises(exc, match=mention.replace("[", r"\[").replace("]", r"\]")):
        Fabrics.from_config(raw, REG)
