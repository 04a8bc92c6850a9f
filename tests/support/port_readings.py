"""Switch ports held to readings written by hand in a fixture's manifest: per port its mode,
its untagged VLAN and VLAN set (``vlans``, a VLAN list; else the one ``vlan``) unless shut
down, and its aggregate (``bond``, none when absent)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpufabric.fabrics.ethernet.readers.running_config import parse_vlan_list
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode


def assert_readings(got: Mapping[str, EthernetPortConfig], expected: Mapping[str, Any]) -> None:
    assert set(got) == set(expected)
    for name, e in expected.items():
        p = got[name]
        assert p.mode is PortMode(e["mode"]), (name, p)
        assert p.bond == e.get("bond", ""), (name, p)
        if p.mode is not PortMode.SHUTDOWN:
            assert (p.vlan.value if p.vlan else None) == e["vlan"], (name, p)
            assert p.vlans() == (set(parse_vlan_list(str(e["vlans"]))) if "vlans" in e else {e["vlan"]}), name
