"""Pure parser of Dell OS9 (FTOS) running configs into port configurations.

OS9 keeps VLAN membership on the VLAN, not the port: ``interface Vlan N`` lists its members
(``untagged TenGigabitEthernet 0/14,19-20,23``, ``tagged Port-channel 1-5``), and the port block
says only whether it is a ``switchport`` (OS9 ports are routed unless it says so), ``portmode
hybrid`` and ``shutdown``. Read as the switch applies it:

* untagged in VLAN V, tagged in none -> access V; tagged only -> trunk without a native VLAN,
  except on a hybrid port, whose untagged frames go to the default VLAN (trunk, native = the
  default VLAN); untagged V and tagged -> trunk with native V; in no VLAN -> access in the
  default VLAN (``default vlan-id N``, else 1); ``shutdown`` -> SHUTDOWN.
* ``!untagged ...`` under the default VLAN is the switch's own list of its implicit untagged
  members: where printed, it decides whether a tagged port's untagged frames land in the default
  VLAN (native = default VLAN) or are dropped (no native); where not, the hybrid rule above does.
* The I/O Aggregator (``stack-unit N provision I/O-Aggregator``) states membership on the port
  (``vlan tagged 33,36-37``, ``vlan untagged 48``), read the same way; its ``auto vlan`` ports,
  and its ports that state none, take VLANs the config does not show (standalone mode assigns
  them): they are not read rather than guessed.
* A member of a port-channel (``port-channel-protocol LACP`` / ``port-channel N mode active``,
  or the port-channel's ``channel-member`` list) carries the port-channel's VLANs (its own
  shutdown aside); :func:`parse_os9_bonds` lists the memberships (``vlt-peer-lag`` = VLT). A
  member of a port-channel the config does not show is read SHUTDOWN in that channel.

Port names lose the CLI's space (``TenGigabitEthernet 0/1`` -> ``TenGigabitEthernet0/1``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Final

from gpufabric.fabrics.ethernet.readers.ios import BondMember
from gpufabric.fabrics.ethernet.readers.portcfg import NOT_PORTS, parse_vlan_list
from gpufabric.fabrics.ethernet.readers.portcfg import port as _port
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode

_IFACE: Final = re.compile(r"^interface\s+([A-Za-z][A-Za-z-]*)\s*(\d[\d/]*)\s*$")
_MEMBER_PC: Final = re.compile(r"^port-channel\s+(\d+)\s+mode\s+(active|passive)$")


def os9_name(kind: str, number: str) -> str:
    return f"{kind}{number}"


def expand_members(words: list[str]) -> list[str]:
    """``["TenGigabitEthernet", "0/14,19-20", "Port-channel", "1-2"]`` -> port names."""
    out: list[str] = []
    kind = ""
    for w in words:
        if w[:1].isalpha():
            kind = w
            continue
        prefix = ""
        for item in w.split(","):
            lo, _, hi = item.partition("-")
            if "/" in lo:
                prefix, lo = lo.rsplit("/", 1)[0] + "/", lo.rsplit("/", 1)[1]
            hi = hi.rsplit("/", 1)[-1] if hi else lo
            if lo.isdigit() and hi.isdigit():
                out += [f"{kind}{prefix}{i}" for i in range(int(lo), int(hi) + 1)]
    return out


@dataclass
class _Os9Config:
    ports: dict[str, list[str]] = field(default_factory=dict)  # name -> body lines
    untagged: dict[str, int] = field(default_factory=dict)
    tagged: dict[str, set[int]] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # member -> Port-channelN
    default_vlan: int = 1
    implicit: dict[int, set[str]] = field(default_factory=dict)  # vlan -> "!untagged" members
    ioa: bool = False  # an I/O Aggregator: VLANs the config does not show on unstated ports
    stated: set[str] = field(default_factory=set)  # ports stating their own VLANs (IOA)


def _read(text: str, default_vlan: int) -> _Os9Config:
    cfg = _Os9Config(default_vlan=default_vlan)
    name: str | None = None
    vlan: int | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        s = line.strip()
        if m := _IFACE.match(s):
            name, vlan = None, None
            if m[1].lower() == "vlan":
                vlan = int(m[2])
            else:
                name = os9_name(m[1], m[2])
                cfg.ports[name] = []
            continue
        if vlan is not None and s.startswith("!untagged "):
            cfg.implicit.setdefault(vlan, set()).update(expand_members(s.split()[1:]))
            continue
        if not s or s.startswith("!"):
            continue  # separators
        if line[:1] not in (" ", "\t"):
            name = vlan = None
            if m := re.fullmatch(r"default vlan-id (\d+)", s):
                cfg.default_vlan = int(m[1])
            cfg.ioa = cfg.ioa or bool(re.fullmatch(r"stack-unit \d+ provision I/O-Aggregator", s))
            continue
        w = s.split()
        if vlan is not None and w[0] in ("untagged", "tagged"):
            for p in expand_members(w[1:]):
                if w[0] == "untagged":
                    cfg.untagged[p] = vlan
                else:
                    cfg.tagged.setdefault(p, set()).add(vlan)
        elif name is not None and len(w) == 3 and w[:2] in (["vlan", "untagged"], ["vlan", "tagged"]):
            cfg.stated.add(name)
            if w[1] == "untagged":
                cfg.untagged[name] = int(w[2])
            else:
                cfg.tagged.setdefault(name, set()).update(parse_vlan_list(w[2]))
        elif name is not None:
            cfg.ports[name].append(s)
            if w[0] == "channel-member" and name.lower().startswith("port-channel"):
                for p in expand_members(w[1:]):
                    cfg.static_members[p] = name
    return cfg


def _bond(cfg: _Os9Config, name: str, body: list[str]) -> tuple[str, str] | None:
    for ln in body:
        if m := _MEMBER_PC.match(ln):
            return f"Port-channel{m[1]}", m[2]
    if name in cfg.static_members:
        return cfg.static_members[name], "on"
    return None


def _config(cfg: _Os9Config, switch: str, name: str, body: list[str]) -> EthernetPortConfig | None:
    if "switchport" not in body:
        return None  # OS9 ports are routed (or unconfigured) unless they say "switchport"
    if "auto vlan" in body or (cfg.ioa and name not in cfg.stated):
        return None  # VLANs the I/O Aggregator assigns itself: not in the config
    if "shutdown" in body:
        return _port(switch, name, PortMode.SHUTDOWN)
    untagged = cfg.untagged.get(name)
    tagged = cfg.tagged.get(name, set())
    if not tagged:
        return _port(switch, name, PortMode.ACCESS, untagged if untagged is not None else cfg.default_vlan)
    implicit = cfg.implicit.get(cfg.default_vlan)
    if untagged is None and (name in implicit if implicit is not None else "portmode hybrid" in body):
        untagged = cfg.default_vlan
    return _port(switch, name, PortMode.TRUNK, untagged, tagged | ({untagged} if untagged is not None else set()))


def interface_names_os9(text: str) -> frozenset[str]:
    """Every interface block of the config (port names without the CLI's space)."""
    return frozenset(n for n in _read(text, 1).ports if not NOT_PORTS.match(n))


def parse_os9(text: str, switch: str, options: dict[str, Any]) -> tuple[EthernetPortConfig, ...]:
    """Ports of an OS9 running config (see the module docstring for the reading)."""
    cfg = _read(text, int(options.get("default_vlan", 1)))
    out: list[EthernetPortConfig] = []
    for name, body in cfg.ports.items():
        if NOT_PORTS.match(name):
            continue
        if (b := _bond(cfg, name, body)) is not None:
            pc = cfg.ports.get(b[0])
            agg = _config(cfg, switch, b[0], pc) if pc is not None else None
            if agg is None and pc is not None:
                continue  # a routed (or unread) port-channel's member
            shut = agg is None or "shutdown" in body or agg.mode is PortMode.SHUTDOWN  # agg None: a missing channel
            out.append(replace(agg, port=name) if agg is not None and not shut else _port(switch, name, PortMode.SHUTDOWN))
            continue
        if (p := _config(cfg, switch, name, body)) is not None:
            out.append(p)
    return tuple(out)


def parse_os9_bonds(text: str) -> tuple[BondMember, ...]:
    """Every port-channel member of an OS9 config: LACP (``port-channel N mode active``) or
    static (the port-channel's ``channel-member`` list); ``vlt-peer-lag`` marks a VLT LAG."""
    cfg = _read(text, 1)
    out: list[BondMember] = []
    for name, body in cfg.ports.items():
        if (b := _bond(cfg, name, body)) is None:
            continue
        pc_body = cfg.ports.get(b[0], [])
        peer = next((ln for ln in pc_body if ln.startswith("vlt-peer-lag")), "")
        out.append(BondMember(name, b[0], b[1], "vlt " + peer.split()[-1] if peer else ""))
    return tuple(out)
