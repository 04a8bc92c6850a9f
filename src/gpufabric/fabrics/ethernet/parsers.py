"""Pure parsers of switch running configs into :class:`SwitchState` (device port names).

One parser per config family, chosen by the dialect's ``parser`` field:

* ``ios``        – NX-OS / EOS / OS10 ``interface`` blocks (:mod:`~gpufabric.fabrics.ethernet.ios`)
* ``os9``        – Dell OS9 (FTOS): VLAN membership under ``interface Vlan N`` (:mod:`~gpufabric.fabrics.ethernet.os9`)
* ``junos_set``  – Junos ``show configuration ... | display set``
* ``sonic_json`` – SONiC ``show runningconfiguration all`` (CONFIG_DB as JSON), also the forms of
  older releases: VLAN ``members`` lists, a missing ``admin_status`` read by release
  (:func:`sonic_admin_default`: up when the release is unknown)
* ``nvue_json``  – Cumulus ``nv config show -o json`` (or its default YAML, /etc/nvue.d/startup.yaml);
  range and comma keys (``bond1-3``, ``swp1,51-54``) merged into each interface they name
  (:func:`nvue_interfaces`)
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
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final

import yaml

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.dialects import Dialect
from gpufabric.fabrics.ethernet.ios import BondMember, parse_ios, parse_ios_bonds
from gpufabric.fabrics.ethernet.os9 import interface_names_os9, parse_os9, parse_os9_bonds
from gpufabric.fabrics.ethernet.ovs_columns import PortColumns, config_from_columns
from gpufabric.fabrics.ethernet.portcfg import ALL_VLANS, NO_QUARANTINE, NOT_PORTS, parse_vlan_list
from gpufabric.fabrics.ethernet.portcfg import port as _port
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState

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


def members_of(
    switch: str, members: dict[str, tuple[str, bool]], aggregates: dict[str, EthernetPortConfig], known: set[str]
) -> list[EthernetPortConfig]:
    """Aggregate members (name -> (aggregate, own shutdown)) read with their aggregate's VLANs and
    ``bond`` the aggregate; a member of an aggregate the config does not have at all is read
    SHUTDOWN (it carries no VLAN the config shows) in that aggregate, which the plan refuses and
    the audit reports; a member of one the config has but not as a switching port (routed) is
    not read."""
    out: list[EthernetPortConfig] = []
    for name, (bond, shut) in members.items():
        agg = aggregates.get(bond)
        if agg is None and bond in known:
            continue
        if agg is None or shut or agg.mode is PortMode.SHUTDOWN:
            out.append(replace(_port(switch, name, PortMode.SHUTDOWN), bond=bond))
        else:
            out.append(replace(agg, port=name, bond=bond))
    return out


# --------------------------------------------------------------------------- sonic
def sonic_admin_default(db: dict[str, Any]) -> str:
    """What a ``PORT`` / ``PORTCHANNEL`` entry without ``admin_status`` is, which depends on the
    release. A config with a ``VERSIONS`` table (db_migrator's, SONiC 201811 and later) comes from
    a release whose portmgrd/teammgrd default a missing admin status to ``down``. Without one the
    release is unknown: older releases brought every port up from /etc/network/interfaces
    (interfaces.j2 ``pre-up ifconfig EthernetN up``), and a hand-made or partial config_db says
    nothing; the entry is then read **up**. That is the safe assumption for isolation: a port
    read shut down is one the plan leaves alone and the audit counts as isolated, so a port that
    may forward must never be read so; read up, its VLANs are compared with the tenants' layout
    (any membership reported) and quarantine writes ``admin_status down`` explicitly. The cost of
    the assumption when wrong is a shut port reported and shut again."""
    return "down" if isinstance(db.get("VERSIONS"), dict) and db["VERSIONS"] else "up"


def _listed(raw: Any) -> list[str]:
    """A ``members`` field: a JSON list, or the comma-separated ``members@`` string of the
    Redis form."""
    if isinstance(raw, str):
        return [m for m in raw.split(",") if m]
    return [str(m) for m in raw or []]


def sonic_vlan_members(db: dict[str, Any]) -> dict[str, dict[int, bool]]:
    """port -> {VLAN id: tagged}, from ``VLAN_MEMBER`` ("Vlan10|Ethernet0", its ``tagging_mode``)
    when the config has that table: it is what vlanmgrd applies, and a later release's ``VLAN``
    ``members`` list beside it may be stale (``config vlan member del`` leaves it). Without the
    table (releases before it) the ``VLAN`` entry's ``members`` list is the membership, each
    member untagged: the list has no tagging mode, and those releases put each member in the
    VLAN's Linux bridge untagged (interfaces.j2 ``brctl addif Vlan1000 EthernetN``)."""
    vlans = db.get("VLAN") or {}

    def vid_of(name: str) -> int:
        return int((vlans.get(name) or {}).get("vlanid", name.removeprefix("Vlan")))

    out: dict[str, dict[int, bool]] = {}
    if "VLAN_MEMBER" in db:
        for key, attrs in (db.get("VLAN_MEMBER") or {}).items():
            name, _, port = key.partition("|")
            out.setdefault(port, {})[vid_of(name)] = (attrs or {}).get("tagging_mode", "tagged") != "untagged"
        return out
    for name, attrs in vlans.items():
        for port in _listed((attrs or {}).get("members")):
            out.setdefault(port, {})[vid_of(name)] = False
    return out


def parse_sonic_json(text: str, switch: str, options: dict[str, Any]) -> tuple[EthernetPortConfig, ...]:
    """CONFIG_DB as JSON: VLAN membership (:func:`sonic_vlan_members`), admin status
    (:func:`sonic_admin_default` where an entry has none), PortChannel members
    (``PORTCHANNEL_MEMBER`` "PortChannel10|Ethernet24", or where a config has no such table the
    ``PORTCHANNEL`` entry's ``members`` list) read with their channel. A VLAN member without a ``PORT`` entry (an old config_db
    listing only some ports) is read as the VLAN says."""
    db = _json(text, "SONiC running configuration")
    default = sonic_admin_default(db)
    members = sonic_vlan_members(db)
    port_table = db.get("PORT") or {}
    channels = db.get("PORTCHANNEL") or {}
    all_ports: dict[str, Any] = {**{name: None for name in members}, **port_table, **channels}
    in_pc: dict[str, tuple[str, bool]] = {}
    if "PORTCHANNEL_MEMBER" in db:  # the table teammgrd applies; the list beside it may be stale
        pairs = [tuple(key.partition("|")[::2]) for key in db.get("PORTCHANNEL_MEMBER") or {}]
    else:
        pairs = [(pc, m) for pc, attrs in channels.items() for m in _listed((attrs or {}).get("members"))]
    for pc, port in pairs:
        in_pc[port] = (pc, (port_table.get(port) or {}).get("admin_status", default) != "up")
    ports: list[EthernetPortConfig] = []
    for name, attrs in all_ports.items():
        if name in in_pc:
            continue  # read with its PortChannel below
        ms = members.get(name, {})
        if (attrs or {}).get("admin_status", default) != "up":
            ports.append(_port(switch, name, PortMode.SHUTDOWN))
            continue
        if not ms:
            continue
        untagged = sorted(v for v, t in ms.items() if not t)
        tagged = {v for v, t in ms.items() if t}
        if tagged or (attrs or {}).get("mode") == "trunk":
            ports.append(_port(switch, name, PortMode.TRUNK, untagged[0] if untagged else None, tagged))
        else:
            ports.append(_port(switch, name, PortMode.ACCESS, untagged[0]))
    return (*ports, *members_of(switch, in_pc, {p.port: p for p in ports}, set(channels)))


# --------------------------------------------------------------------------- nvue
_IFNAME_PART: Final = re.compile(r"(.*?)(\d+)(?:-(\d+))?")
MAX_RANGE: Final = 4096  # interfaces one NVUE range key may name


def expand_ifnames(key: str) -> list[str]:
    """The interfaces an NVUE interface key names: ``swp1`` itself; a range ``bond1-3`` each of
    bond1, bond2, bond3; a comma list each of its parts, a part without a name of its own
    inheriting the previous part's (``swp1,51-54`` is swp1 and swp51-swp54, as NVUE prints it;
    ``swp5-6,8``; ``vlan10,20``). Breakout ports keep their ``sN`` (``swp1s0-3``)."""
    out: list[str] = []
    prefix = ""
    for part in key.split(","):
        m = _IFNAME_PART.fullmatch(part)
        if m is None:
            out.append(part)
            continue
        prefix = m[1] or prefix
        first, last = int(m[2]), int(m[3] or m[2])
        if not 0 <= last - first < MAX_RANGE:
            raise ValidationError("nvue.interface", key, f"a range of 1 to {MAX_RANGE} interfaces (swp1-4)")
        out += [f"{prefix}{m[2]}"] if m[3] is None else [f"{prefix}{i}" for i in range(first, last + 1)]
    return out


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over``'s settings on top of ``base``'s, nested mappings merged; a ``state`` (NVUE's
    one-of choice, ``{down: {}}``) is replaced, never merged into both."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k != "state":
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def nvue_interfaces(ifs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each interface's settings, its keys merged: a range or list key's settings apply to each
    interface it names (``bond1-3``: the bonds' LACP/MLAG settings and bridge domain, beside each
    bond's own key with its member and access VLAN), never as an interface of its own; where two
    keys set the same value the key naming fewer interfaces wins (the member's own key)."""
    keyed = sorted(((expand_ifnames(str(k)), v or {}) for k, v in ifs.items()), key=lambda kv: -len(kv[0]))
    out: dict[str, dict[str, Any]] = {}
    for names, attrs in keyed:
        for name in names:
            out[name] = _merge(out.get(name, {}), attrs)
    return out


def _untagged(raw: Any, default: int | None) -> int | None:
    if raw is None:
        return default
    return None if str(raw) == "none" else int(raw)


def _link_down(attrs: dict[str, Any]) -> bool:
    """``link: state: down`` as NVUE writes it (``{"down": {}}``, the form of ``nv config show``
    and startup.yaml) or as a bare value."""
    state = (attrs.get("link") or {}).get("state")
    return state == "down" or (isinstance(state, dict) and "down" in state)


def _nvue_doc(text: str) -> Any:
    """``nv config show -o json``, or the YAML NVUE shows by default and saves as
    /etc/nvue.d/startup.yaml (the same tree, in a list of ``header`` / ``set`` items)."""
    try:
        return _json(text, "NVUE configuration")
    except ValidationError as e:
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:
            raise e from None
        if not isinstance(doc, (list, dict)):
            raise
        return doc


def parse_nvue_json(text: str, switch: str, options: dict[str, Any]) -> tuple[EthernetPortConfig, ...]:
    doc = _nvue_doc(text)
    cfg: dict[str, Any] = {}
    if isinstance(doc, list):
        for item in doc:
            cfg.update(item.get("set") or {})
    else:
        cfg = doc.get("set", doc)
    domains = (cfg.get("bridge") or {}).get("domain") or {}
    ifs = nvue_interfaces(cfg.get("interface") or {})
    ports: list[EthernetPortConfig] = []
    in_bond: dict[str, str] = {}  # member -> bond: "bondN": {"bond": {"member": {"swp1": {}}}}
    for bond, attrs in ifs.items():
        for m in (attrs.get("bond") or {}).get("member") or {}:
            in_bond.update({name: bond for name in expand_ifnames(str(m))})
    down: set[str] = set()
    for name, attrs in ifs.items():
        if name in in_bond:
            if _link_down(attrs):
                down.add(name)
            continue  # read with its bond below
        if _link_down(attrs):
            ports.append(_port(switch, name, PortMode.SHUTDOWN))
            continue
        doms = (attrs.get("bridge") or {}).get("domain") or {}
        if not doms:
            continue
        dname, d = next(iter(doms.items()))
        d = d or {}
        dom = domains.get(dname) or {}
        if d.get("access") is not None:
            ports.append(_port(switch, name, PortMode.ACCESS, int(d["access"])))
            continue
        vlan_keys = d.get("vlan") or dom.get("vlan") or {}
        vids: set[int] = set()
        for k in vlan_keys:
            vids |= set(parse_vlan_list(str(k)))
        nat = _untagged(d.get("untagged"), _untagged(dom.get("untagged"), 1))
        ports.append(_port(switch, name, PortMode.TRUNK, nat, vids))
    members = {m: (b, m in down) for m, b in in_bond.items()}
    return (*ports, *members_of(switch, members, {p.port: p for p in ports}, set(in_bond.values())))


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


def _json(text: str, what: str) -> Any:
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    try:
        return json.loads(text[start:] if start >= 0 else text)
    except json.JSONDecodeError as e:
        raise ValidationError(what, text[:200], "JSON", str(e)) from e


def interface_names(dialect: Dialect, text: str) -> frozenset[str] | None:
    """Every interface the switch has, from its running config, for dialects whose config
    lists them all (IOS-like ``interface`` blocks, SONiC ``PORT``, OVS ports); None for those
    whose config lists only the configured ones (Junos, NVUE)."""
    if dialect.parser == "ios":
        return frozenset(m[1] for m in re.finditer(r"^interface\s+(\S+)\s*$", text, re.MULTILINE))
    if dialect.parser == "os9":
        return interface_names_os9(text)
    if dialect.parser == "sonic_json":
        db = _json(text, "SONiC running configuration")
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
