"""Pure parsers of switch running configs into :class:`SwitchState` (device port names).

One parser per config family, chosen by the dialect's ``parser`` field:

* ``ios``        – NX-OS / EOS / OS10 ``interface`` blocks (:mod:`~gpufabric.fabrics.ethernet.readers.ios`)
* ``os9``        – Dell OS9 (FTOS): VLAN membership under ``interface Vlan N`` (:mod:`~gpufabric.fabrics.ethernet.readers.os9`)
* ``junos_set``  – Junos ``show configuration ... | display set``
* ``sonic_json`` – SONiC ``show runningconfiguration all`` (CONFIG_DB as JSON), also the forms of
  older releases: VLAN ``members`` lists, a missing ``admin_status`` read by release
  (:mod:`~gpufabric.fabrics.ethernet.readers.sonic`: a missing admin status up when the release is unknown)
* ``nvue_json``  – Cumulus ``nv config show -o json`` (or its default YAML, /etc/nvue.d/startup.yaml);
  range and comma keys (``bond1-3``, ``swp1,51-54``) merged into each interface they name
  (:mod:`~gpufabric.fabrics.ethernet.readers.nvue`)
* ``ovs_json``   – ``ovs-vsctl --format=json list bridge / list port``

Everything here is text in, value out: no I/O. The vendor formats follow each vendor's
documented output; tests/fixtures/ssh/<dialect>/running-config.* pin concrete samples, and
real outputs copied from public repositories pin what devices print
(tests/fixtures/real/ethernet/<dialect>/, run by tests/unit/test_real_outputs.py):

* NX-OS: NX-OSv 7.3, Nexus 9000 7.0(3)I2 (checkpoint, defaults as ``!#`` lines), 7.0(3)I7 and
  Nexus 3000 6.0(2) (``show running-config all``), Nexus 7000 6.2 (vPC, FEX), Nexus 9000v
  7.0(3)I7 / 9.2 / 9.3 session captures. Running configs leave defaults out: a ``switchport
  ...`` subcommand makes a port L2, an IP address routed, else ``system default switchport``
  or the default the config's own ``(no) switchport`` lines reveal, else the dialect's.
* EOS: vEOS 4.24 / 4.26 (LACP port-channel members carrying only ``channel-group``), DCS-7260CX
  4.19-4.22 (``show running-config all``).
* Members of a port-channel are read with the port-channel's VLANs (:func:`parse_ios`),
  never as access VLAN 1, and with the channel they are in (``EthernetPortConfig.bond``, from
  :func:`parse_ios_bonds` / :func:`parse_os9_bonds`); a port outside any channel has no bond.
* Dell OS10: one real output (OS10 10.4.0E S6000-VM, breakout lines, a VLT port-channel).
* Junos ``display set`` (read with ``| display inheritance``, so statements inherited from
  ``apply-groups`` are printed as the interface's own): a port is shut down by ``disable`` on
  the interface or on its switching unit (NAPALM reads the unit's ``iff-down`` flag as
  disabled, napalm/junos/utils/junos_views.yml:30-34); batfish's set-style test configs (ELS
  and non-ELS VLANs, a routed ae0 of two ``ether-options 802.3ad`` members); SONiC: one real
  config_db.json (Force10-S6000 ToR: routed PortChannels, an untagged VLAN); NVUE: two Cumulus VX 5.x startup.yaml (EVPN-MH bonds;
  MLAG LACP bonds and a peerlink, NVUE's YAML and its ``link: state: {down: {}}`` form). No real
  config with an L2 Junos ae or an L2 SONiC PortChannel was found; those are pinned by the
  vendor-doc samples.
  A Junos member (``ether-options 802.3ad aeN``, or ``gigether-options`` / ``fastether-options``;
  its ``802.3ad primary`` / ``backup`` lines name no aggregate), a SONiC
  ``PORTCHANNEL_MEMBER`` and an NVUE bond's ``member`` carry no VLAN of their own: each is read
  with its aggregate's configuration (its own ``disable`` / admin down / link down aside) and
  ``bond`` the aggregate (:func:`members_of`), as the IOS-like and OS9 members are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Final, Protocol

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.readers.ios import BondMember, parse_ios, parse_ios_bonds
from gpufabric.fabrics.ethernet.readers.nvue import expand_ifnames, nvue_interfaces, parse_nvue_json
from gpufabric.fabrics.ethernet.readers.os9 import interface_names_os9, parse_os9, parse_os9_bonds
from gpufabric.fabrics.ethernet.readers.ovs_columns import PortColumns, config_from_columns
from gpufabric.fabrics.ethernet.readers.portcfg import (
    ALL_VLANS,
    NO_QUARANTINE,
    NOT_PORTS,
    json_doc,
    members_of,
    parse_vlan_list,
)
from gpufabric.fabrics.ethernet.readers.portcfg import port as _port
from gpufabric.fabrics.ethernet.readers.sonic import parse_sonic_json, sonic_admin_default, sonic_vlan_members
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState


class Dialect(Protocol):
    """What a reader needs of a CLI dialect (a ``Dialect`` of the SSH driver's dialects.py, its
    caller): the parser's name and its options. A reader imports no driver."""

    @property
    def parser(self) -> str: ...

    @property
    def options(self) -> Mapping[str, Any]: ...


# --------------------------------------------------------------------------- junos
_JUNOS_VLAN_LIST: Final = re.compile(r"(?i:all|none|\d+(?:-\d+)?)")
# ``802.3ad`` under these takes ``aeN`` or, as a separate statement, ``primary`` / ``backup``
# (link protection) or ``lacp ...``: only ``aeN`` names the aggregate
_JUNOS_LAG_OPTIONS: Final = ("ether-options", "gigether-options", "fastether-options")
_JUNOS_AE: Final = re.compile(r"ae\d+")


def parse_junos_set(text: str, switch: str, options: dict[str, Any]) -> tuple[EthernetPortConfig, ...]:
    names: dict[str, int] = {}
    ifs: dict[str, dict[str, Any]] = {}
    for raw in text.splitlines():
        w = raw.split()
        if len(w) >= 5 and w[:2] == ["set", "vlans"] and w[3] == "vlan-id":
            names[w[2]] = int(w[4])
            continue
        if len(w) < 4 or w[:2] != ["set", "interfaces"] or NOT_PORTS.match(w[2]):
            continue
        d = ifs.setdefault(
            w[2],
            {"members": [], "mode": None, "native": None, "unit_native": False, "disable": False, "l2": False, "bond": "",
             "units": set(), "units_off": set()},
        )  # fmt: skip
        rest = w[3:]
        if len(rest) == 3 and rest[0] in _JUNOS_LAG_OPTIONS and rest[1] == "802.3ad" and _JUNOS_AE.fullmatch(rest[2]):
            d["bond"] = rest[2]  # a member of aggregate aeN (ELS / older ``gigether-options``)
        elif rest == ["disable"]:
            d["disable"] = True
        elif len(rest) == 3 and rest[0] == "unit" and rest[2] == "disable":
            d["units_off"].add(rest[1])  # the logical unit is down (iff-down), its family with it
        elif rest[0] == "native-vlan-id" and len(rest) == 2:
            d["native"] = int(rest[1])
        elif len(rest) >= 4 and rest[0] == "unit" and rest[2:4] == ["family", "ethernet-switching"]:
            d["l2"] = True
            d["units"].add(rest[1])
            tail = rest[4:]
            if tail[:1] in (["interface-mode"], ["port-mode"]) and len(tail) == 2:
                d["mode"] = tail[1]
            elif tail[:2] == ["vlan", "members"]:
                d["members"] += [m for m in tail[2:] if m not in ("[", "]")]
            elif tail[:1] == ["native-vlan-id"] and len(tail) == 2:  # non-ELS: under the family
                d["native"], d["unit_native"] = int(tail[1]), True
    ports: list[EthernetPortConfig] = []
    for d in ifs.values():  # a disabled switching unit carries no traffic: the port is shut down
        d["disable"] = d["disable"] or bool(d["units"] & d["units_off"])
    for name, d in ifs.items():
        if d["bond"]:
            continue  # read with its aggregate below
        if not d["l2"]:
            if d["disable"]:
                ports.append(_port(switch, name, PortMode.SHUTDOWN))
            continue
        vids: set[int] = set()
        for m in d["members"]:
            if m in names:
                vids.add(names[m])
            elif _JUNOS_VLAN_LIST.fullmatch(m):
                vids |= parse_vlan_list(m)
            # else: a VLAN name with no vlan-id (or undefined): Junos puts the port in no VLAN
        if d["unit_native"] and d["mode"] == "trunk":  # non-ELS native-vlan-id: untagged frames join it
            vids.add(d["native"])
        if d["members"] and not vids and not d["disable"]:
            continue  # none of its members resolves to a VLAN id: not a switching port
        if d["disable"]:
            ports.append(_port(switch, name, PortMode.SHUTDOWN))
        elif d["mode"] == "trunk":
            nat = d["native"] if d["native"] in vids else None
            ports.append(_port(switch, name, PortMode.TRUNK, nat, vids))
        else:
            ports.append(
                _port(switch, name, PortMode.ACCESS, min(vids) if vids else int(options.get("default_vlan", 1)))
            )
    members = {name: (d["bond"], d["disable"]) for name, d in ifs.items() if d["bond"]}
    return (*ports, *members_of(switch, members, {p.port: p for p in ports}, set(ifs)))


# --------------------------------------------------------------------------- ovs
def _ovs_set(v: Any) -> list[Any]:
    if isinstance(v, list) and len(v) == 2 and v[0] == "set":
        return list(v[1])
    if isinstance(v, list) and len(v) == 2 and v[0] == "uuid":
        return [v]
    return [v]


def _ovs_scalar(v: Any) -> Any:
    s = _ovs_set(v)
    return s[0] if s else None


def parse_ovs_json(
    text: str, switch: str, options: dict[str, Any], *, bridge: str | None = None, quarantine: int | None = None
) -> tuple[EthernetPortConfig, ...]:
    docs = [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]
    if len(docs) != 2:
        raise ValidationError("ovs-vsctl output", text[:200], "two JSON tables (bridge, port)")
    bridges: dict[str, str] = {}
    bridge_names: set[str] = set()
    for row in docs[0]["data"]:
        r = dict(zip(docs[0]["headings"], row, strict=True))
        bridge_names.add(r["name"])
        for u in _ovs_set(r["ports"]):
            bridges[u[1]] = r["name"]
    ports: list[EthernetPortConfig] = []
    for row in docs[1]["data"]:
        r = dict(zip(docs[1]["headings"], row, strict=True))
        name = r["name"]
        if name in bridge_names or (bridge is not None and bridges.get(r["_uuid"][1]) != bridge):
            continue
        cols = PortColumns(
            vlan_mode=_ovs_scalar(r["vlan_mode"]) or "",
            tag=_ovs_scalar(r["tag"]),
            trunks=tuple(int(t) for t in _ovs_set(r["trunks"])),
            protected=bool(_ovs_scalar(r.get("protected", False))) and quarantine is not None,
        )
        q = VlanId(quarantine) if quarantine is not None else NO_QUARANTINE
        ports.append(config_from_columns(switch, name, cols, q))
    return tuple(ports)


# --------------------------------------------------------------------------- dispatch
def natural_key(name: str) -> tuple[tuple[int, str], ...]:
    """Sort key putting Ethernet1/2 before Ethernet1/10."""
    return tuple((int(t), "") if t.isdigit() else (-1, t) for t in re.findall(r"\d+|\D+", name))


__all__ = [
    "ALL_VLANS",
    "BondMember",
    "expand_ifnames",
    "interface_names",
    "lists_every_interface",
    "nvue_interfaces",
    "parse_ios",
    "parse_ios_bonds",
    "parse_junos_set",
    "parse_nvue_json",
    "parse_os9",
    "parse_os9_bonds",
    "parse_ovs_json",
    "parse_running_config",
    "parse_sonic_json",
    "parse_vlan_list",
    "sonic_admin_default",
    "sonic_vlan_members",
]


def interface_names(dialect: Dialect, text: str) -> frozenset[str] | None:
    """Every interface the switch has, from its running config, for dialects whose config
    lists them all (IOS-like ``interface`` blocks, SONiC ``PORT``, OVS ports); None for those
    whose config lists only the configured ones (Junos, NVUE)."""
    if dialect.parser == "ios":
        return frozenset(m[1] for m in re.finditer(r"^interface\s+(\S+)\s*$", text, re.MULTILINE))
    if dialect.parser == "os9":
        return interface_names_os9(text)
    if dialect.parser == "sonic_json":
        db = json_doc(text, "SONiC running configuration")
        return frozenset({**sonic_vlan_members(db), **(db.get("PORT") or {}), **(db.get("PORTCHANNEL") or {})})
    if dialect.parser == "ovs_json":
        docs = [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]
        if len(docs) == 2 and "name" in docs[1]["headings"]:
            i = docs[1]["headings"].index("name")
            return frozenset(row[i] for row in docs[1]["data"])
    return None


def lists_every_interface(dialect: Dialect) -> bool:
    """The dialect's option ``lists_every_interface``: its running config names every
    interface the switch has, so a port missing from it does not exist."""
    listing = dialect.parser in ("ios", "os9", "sonic_json", "ovs_json")
    return bool(dialect.options.get("lists_every_interface")) and listing


_PARSERS: Final[dict[str, Callable[[str, str, dict[str, Any]], tuple[EthernetPortConfig, ...]]]] = {
    "ios": parse_ios,
    "os9": parse_os9,
    "junos_set": parse_junos_set,
    "sonic_json": parse_sonic_json,
    "nvue_json": parse_nvue_json,
}

_BONDS: Final[dict[str, Callable[[str], tuple[BondMember, ...]]]] = {"ios": parse_ios_bonds, "os9": parse_os9_bonds}


def parse_running_config(
    dialect: Dialect, text: str, *, switch: str = "", quarantine: VlanId | None = None, bridge: str | None = None
) -> SwitchState:
    """Parse ``text`` (the output of the dialect's read commands) into a SwitchState.

    ``quarantine`` lets dialects without an administrative shutdown (OVS) report ports
    parked there as SHUTDOWN; ``bridge`` limits OVS to one bridge's ports.
    """
    opts = dict(dialect.options)
    if dialect.parser == "ovs_json":
        q = quarantine.value if quarantine is not None else None
        ports = parse_ovs_json(text, switch, opts, bridge=bridge, quarantine=q)
    elif dialect.parser in _PARSERS:
        ports = _PARSERS[dialect.parser](text, switch, opts)
    else:
        raise ValidationError("dialect.parser", dialect.parser, ", ".join([*_PARSERS, "ovs_json"]))
    if dialect.parser in _BONDS:  # a member is read with its channel: the aggregate it is in
        of = {m.port: m.bond for m in _BONDS[dialect.parser](text)}
        ports = tuple(replace(p, bond=of[p.port]) if p.port in of else p for p in ports)
    return SwitchState(switch=switch, ports=tuple(sorted(ports, key=lambda p: natural_key(p.port))))
