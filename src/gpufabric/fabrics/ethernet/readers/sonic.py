"""SONiC CONFIG_DB (``show runningconfiguration all``) read into port configs: VLAN membership and
admin status in the forms of current and older releases (see :func:`sonic_admin_default`)."""

from __future__ import annotations

from typing import Any

from gpufabric.fabrics.ethernet.readers.portcfg import json_doc, members_of
from gpufabric.fabrics.ethernet.readers.portcfg import port as _port
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode


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
    db = json_doc(text, "SONiC running configuration")
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
