"""The Ethernet fabric's declared inventory beyond the nodes: each switch's uplinks, hence each NIC's
path up the Ethernet fabric (issue 31 item 11, NVIDIA NCP NET01-01): its leaf (the
switch it is cabled to) and the tiers of switches above it, from the uplinks ``fabrics.yaml``
declares per switch. gpufabric's switch drivers read VLANs and ports, not LLDP neighbours (and
the lab's OVS bridges, joined by patch ports, send none), so the Ethernet topology is what the
operator declares::

    ethernet:
      - {driver: ssh, options: {switch: leaf-1, ...}, uplinks: [spine-1, spine-2]}
      - {driver: ssh, options: {switch: spine-1, ...}, uplinks: [core-1]}

A switch's uplinks name the switches its uplinks go to; the tiers above them come from their
own entries (a switch gpufabric does not drive has none: the path stops there). Optional: a
switch without ``uplinks`` is its ports' whole path. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.topology import MAX_TIER_SWITCHES, SWITCH_NAME_ALLOWED, check_switch_name

UPLINKS_ALLOWED: Final = f"a list of at most {MAX_TIER_SWITCHES} switch names ({SWITCH_NAME_ALLOWED}), each once"


def declared_uplinks(section: Any) -> dict[str, tuple[str, ...]]:
    """switch -> the switches its uplinks go to, of every entry of an Ethernet instance's section
    with ``uplinks``; ConfigError naming ``ethernet[i].uplinks`` for a bad one."""
    out: dict[str, tuple[str, ...]] = {}
    for i, entry in enumerate(section if isinstance(section, list) else ()):
        if not isinstance(entry, Mapping) or entry.get("uplinks") is None:
            continue
        where, raw = f"ethernet[{i}].uplinks", entry["uplinks"]
        switch = (entry.get("options") or {}).get("switch")
        if not isinstance(raw, list) or len(raw) > MAX_TIER_SWITCHES or len(set(map(str, raw))) != len(raw):
            raise ConfigError(where, raw, UPLINKS_ALLOWED)
        names = tuple(check_switch_name(f"{where}[{k}]", u) for k, u in enumerate(raw))
        if switch in names:
            raise ConfigError(where, switch, f"{UPLINKS_ALLOWED}, not the switch itself")
        if isinstance(switch, str):
            out[switch] = names
    return out

