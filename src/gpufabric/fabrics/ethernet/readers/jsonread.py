"""Pure readers of the structured (``| json``) answers of NX-OS and EOS into port configurations.

Where a platform answers ``| json``, the port state is read from that answer instead of the
running-config text (which leaves defaults out, see :mod:`~gpufabric.fabrics.ethernet.readers.ios`).
A dialect opts in with ``json_read`` (the commands) and ``json_parser`` (``nxos_json`` /
``eos_json``); the driver runs the commands in one session and hands the concatenated output
here. Each command prints one JSON document; the documents are told apart by their shape:

* NX-OS ``show interface | json``: ``TABLE_interface.ROW_interface[]`` rows with ``interface``,
  ``admin_state`` (``up``/``down``; ``svi_admin_state`` on SVIs), ``eth_mode`` (``access``/``trunk``/``routed``; absent on a
  port whose transceiver is missing) and, on a port-channel member, ``eth_bundle`` (``Po69``).
* NX-OS ``show interface switchport | json``: rows with ``switchport`` (``Enabled`` /
  ``Disabled``), ``oper_mode`` (and on some releases ``admin_mode``, read first), ``access_vlan``, ``native_vlan``, ``trunk_vlans``.
  NX-API prints ``ROW_*`` as an object when the table has one row, a list otherwise, and
  ``TABLE_*`` as an object or as a list of ``{ROW_*: ...}`` objects.
* EOS ``show interfaces | json``: ``interfaces.<name>`` with ``interfaceStatus`` (``disabled``
  = shut down), ``forwardingModel`` (``bridged``/``routed``/``dataLink`` = a port-channel
  member) and ``interfaceMembership`` (``Member of Port-Channel1``).
* EOS ``show interfaces switchport | json``: ``switchports.<name>`` with ``enabled`` (is a
  switchport) and ``switchportInfo`` (``mode``, ``accessVlanId``, ``trunkingNativeVlanId``,
  ``trunkAllowedVlans``: ``ALL`` / ``NONE`` / ``10,20-30``).

Real answers (tests/fixtures/real/ethernet/{eos,nxos}-json/): EOS ``show interfaces | json`` of
six devices (NAPALM, pyeapi, four vEOS 4.21 / 4.23 MLAG leaves of batfish/lab-validation), NX-OS
``show interface | json`` of a Nexus 3548 (NAPALM) and one ``show interface switchport | json``
row (cisco.nxos, GPL-3.0, not committed). No real EOS ``show interfaces switchport | json`` and
no other NX-OS switchport answer under a permissive licence was found (searched: NAPALM's EOS
mocked data, pyeapi, batfish/lab-validation, which collects ``show interfaces | json`` only,
ntc-templates, the index for ``"trunk_vlans"`` / ``"oper_mode"`` rows: test doubles only), so
the switchport readers are held to hand-built answers in the real shapes below.

Defaults as both platforms apply them: a trunk without an allowed list carries every VLAN
(1-4094), an L2 port without an access (or native) VLAN is in VLAN 1, the native VLAN carries
traffic only when it is allowed. A port-channel member is read with its channel's VLANs (its
own shutdown aside) as :func:`~gpufabric.fabrics.ethernet.readers.ios.parse_ios` reads the text; a
member of a routed channel is not read; one of a channel the answer does not show is read
SHUTDOWN in that channel (the plan refuses to move it, the audit reports it) when its own
switchport row makes it a host port, else not read. A port with no
switchport row (routed, or unknown) is not read. Without the interface document no port is
known to be shut down.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Final

from gpufabric.domain.errors import ValidationError
from gpufabric.fabrics.ethernet.readers.portcfg import ALL_SET, NOT_PORTS, parse_vlan_list
from gpufabric.fabrics.ethernet.readers.portcfg import port as _port
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, same_aggregate

DEFAULT_VLAN: Final = 1
_EOS_SHORT: Final = (("Et", "Ethernet"), ("Po", "Port-Channel"), ("Ma", "Management"))


@dataclass(frozen=True)
class IfState:
    """What an interface document says of one interface."""

    admin_up: bool = True
    mode: str = ""  # nxos eth_mode / eos forwardingModel ("" when not printed)
    bundle: str = ""  # the port-channel this port is a member of ("" when none)


@dataclass(frozen=True)
class Switchport:
    """What a switchport document says of one interface."""

    enabled: bool
    mode: str  # access | trunk | ... (as printed)
    access: int = DEFAULT_VLAN
    native: int = DEFAULT_VLAN
    allowed: frozenset[int] = ALL_SET


@dataclass(frozen=True)
class JsonReading:
    interfaces: Mapping[str, IfState]
    switchports: Mapping[str, Switchport]

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.interfaces) | frozenset(self.switchports)


def json_documents(text: str) -> Iterator[Any]:
    """Every JSON object in ``text`` (prompts, echoed commands and blank lines between skipped)."""
    dec = json.JSONDecoder()
    i = 0
    found = False
    while (start := text.find("{", i)) >= 0:
        try:
            doc, end = dec.raw_decode(text, start)
        except json.JSONDecodeError:
            i = start + 1
            continue
        found = True
        yield doc
        i = end
    if not found and text.strip():
        raise ValidationError("json answer", text[:200], "the JSON documents of the dialect's json_read commands")


def _rows(doc: Mapping[str, Any], table: str = "interface") -> list[Mapping[str, Any]]:
    """The rows of ``TABLE_<table>``. NX-API prints ``TABLE_x`` as an object holding ``ROW_x``, or
    as a list of such objects (NAPALM's ``_get_table_rows``, napalm/nxos/nxos.py:677-697 at
    ee70e63, reads both: ``{'TABLE_intf': [{'ROW_intf': {...``), and ``ROW_x`` as an object when
    it has one row, else a list."""
    tables = doc.get(f"TABLE_{table}") or {}
    rows: list[Any] = []
    for t in tables if isinstance(tables, list) else [tables]:
        got = t.get(f"ROW_{table}") if isinstance(t, dict) else None
        rows += got if isinstance(got, list) else [got]
    return [r for r in rows if isinstance(r, dict) and isinstance(r.get("interface"), str)]


def _vlan(value: Any) -> int:
    """A VLAN number as printed (int or digits); the platform default when absent."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return DEFAULT_VLAN


def _allowed(value: Any) -> frozenset[int]:
    """An allowed-VLAN list as printed; absent or empty means every VLAN (the default)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return ALL_SET
    if isinstance(value, list):
        return frozenset().union(*(_allowed(v) for v in value)) if value else ALL_SET
    return _vlan_list(str(value).strip())


@lru_cache(maxsize=512)
def _vlan_list(text: str) -> frozenset[int]:
    """Every port of a switch prints the same few lists (``1-4094`` on each access port): parse once."""
    return ALL_SET if text in ("1-4094", "ALL") else parse_vlan_list(text)


def _nxos_bundle(value: Any) -> str:
    m = re.fullmatch(r"(?i:po|port-channel)\s*(\d+)", str(value or "").strip())
    return f"port-channel{m[1]}" if m else ""


def read_nxos_json(text: str) -> JsonReading:
    """The interface and switchport documents of NX-OS ``| json`` answers."""
    ifs: dict[str, IfState] = {}
    sps: dict[str, Switchport] = {}
    for doc in json_documents(text):
        if not isinstance(doc, dict):
            continue
        for r in _rows(doc):
            name = r["interface"]
            if "switchport" in r or "oper_mode" in r:
                sps[name] = Switchport(
                    enabled=str(r.get("switchport", "Enabled")).lower() == "enabled",
                    mode=str(r.get("admin_mode") or r.get("oper_mode") or "access").lower(),  # configured first
                    access=_vlan(r.get("access_vlan")),
                    native=_vlan(r.get("native_vlan")),
                    allowed=_allowed(r.get("trunk_vlans")),
                )
            else:  # an interface row (SVIs print svi_admin_state instead of admin_state)
                admin = r.get("admin_state", r.get("svi_admin_state", "up"))
                ifs[name] = IfState(
                    admin_up=str(admin).lower() != "down",
                    mode=str(r.get("eth_mode") or "").lower(),
                    bundle=_nxos_bundle(r.get("eth_bundle")),
                )
    return JsonReading(ifs, sps)


def _eos_name(name: str) -> str:
    for short, full in _EOS_SHORT:
        if re.fullmatch(rf"{short}\d.*", name):
            return full + name[len(short) :]
    return name


def read_eos_json(text: str) -> JsonReading:
    """The interface and switchport documents of EOS ``| json`` answers."""
    ifs: dict[str, IfState] = {}
    sps: dict[str, Switchport] = {}
    for doc in json_documents(text):
        if isinstance(doc, list):  # an eAPI result list
            doc = next((d for d in doc if isinstance(d, dict)), {})
        if not isinstance(doc, dict):
            continue
        for name, i in (doc.get("interfaces") or {}).items():
            if not isinstance(i, dict):
                continue
            m = re.search(r"Member of (\S+)", str(i.get("interfaceMembership") or ""))
            ifs[_eos_name(name)] = IfState(
                admin_up=str(i.get("interfaceStatus", "")).lower() != "disabled",
                mode=str(i.get("forwardingModel") or "").lower(),
                bundle=_eos_name(m[1]) if m else "",
            )
        for name, s in (doc.get("switchports") or {}).items():
            if not isinstance(s, dict):
                continue
            info = s.get("switchportInfo") or {}
            sps[_eos_name(name)] = Switchport(
                enabled=bool(s.get("enabled", True)),
                mode=str(info.get("mode") or "access"),
                access=_vlan(info.get("accessVlanId")),
                native=_vlan(info.get("trunkingNativeVlanId")),
                allowed=_allowed(info.get("trunkAllowedVlans")),
            )
    return JsonReading(ifs, sps)


def _one_port(name: str, sp: Switchport | None, st: IfState | None, switch: str) -> EthernetPortConfig | None:
    if sp is None or not sp.enabled:  # no switchport row, or "Switchport: Disabled" (routed)
        return None
    if st is not None and not st.admin_up:
        return _port(switch, name, PortMode.SHUTDOWN)
    if sp.mode == "trunk":
        nat = sp.native if sp.native in sp.allowed else None
        return _port(switch, name, PortMode.TRUNK, nat, sp.allowed)
    if sp.mode != "access":  # fex-fabric, dot1qTunnel, private-vlan ...: not a host port we model
        return None
    return _port(switch, name, PortMode.ACCESS, sp.access)


def ports_of(reading: JsonReading, switch: str) -> tuple[EthernetPortConfig, ...]:
    """Ports of a reading; members read with their port-channel's VLANs."""
    out: list[EthernetPortConfig] = []
    for name in sorted(reading.names):
        if NOT_PORTS.match(name):
            continue
        st = reading.interfaces.get(name)
        if st is not None and st.bundle:
            chan = _one_port(st.bundle, reading.switchports.get(st.bundle), reading.interfaces.get(st.bundle), switch)
            if chan is None and any(same_aggregate(n, st.bundle) for n in reading.names):
                continue  # a routed (or unread) channel's member
            if chan is None and _one_port(name, reading.switchports.get(name), st, switch) is None:
                continue  # a channel not shown, and no host port itself (a FEX uplink: fex-fabric)
            shut = chan is None or not st.admin_up or chan.mode is PortMode.SHUTDOWN
            cfg = _port(switch, name, PortMode.SHUTDOWN) if shut or chan is None else replace(chan, port=name)
            out.append(replace(cfg, bond=st.bundle))
            continue
        if st is not None and st.mode == "datalink":  # an EOS member whose channel is not named
            continue
        if (p := _one_port(name, reading.switchports.get(name), st, switch)) is not None:
            out.append(p)
    return tuple(out)


def parse_nxos_json(text: str, switch: str, options: dict[str, Any]) -> tuple[EthernetPortConfig, ...]:
    """Ports of NX-OS ``show interface | json`` + ``show interface switchport | json``."""
    return ports_of(read_nxos_json(text), switch)


def parse_eos_json(text: str, switch: str, options: dict[str, Any]) -> tuple[EthernetPortConfig, ...]:
    """Ports of EOS ``show interfaces | json`` + ``show interfaces switchport | json``."""
    return ports_of(read_eos_json(text), switch)


JSON_READERS: Final = {"nxos_json": read_nxos_json, "eos_json": read_eos_json}
JSON_PARSERS: Final = {"nxos_json": parse_nxos_json, "eos_json": parse_eos_json}
