"""The ``| json`` answers of the NX-OS and EOS doubles (NOT the vendors' software).

Rendered from the double's interface blocks in the shapes the real devices print (see
src/gpufabric/fabrics/ethernet/readers/jsonread.py and the real outputs it is held to under
tests/fixtures/real/ethernet/{nxos,eos}-json/): NX-OS ``TABLE_interface.ROW_interface`` rows
(``admin_state``, ``eth_mode``, ``eth_bundle: PoN`` on members; ``switchport``, ``oper_mode``,
``access_vlan``, ``native_vlan``, ``trunk_vlans`` printed as ``1-4094`` when every VLAN is
allowed) and EOS ``interfaces`` / ``switchports`` maps (``interfaceStatus: disabled``,
``forwardingModel: dataLink`` + ``interfaceMembership`` on members, ``trunkAllowedVlans: ALL``).
Values the config leaves out are printed with the platform's defaults filled in (VLAN 1,
every VLAN), which is what the structured read exists for.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from gpufabric.fabrics.ethernet.drivers.ssh.dialects import VlanListStyle
from gpufabric.fabrics.ethernet.readers.running_config import parse_vlan_list

ALL = frozenset(range(1, 4095))
JSON_SHOW = {
    "nxos": ("show interface | json", "show interface switchport | json"),
    "eos": ("show interfaces | json", "show interfaces switchport | json"),
}
_NOT_L2 = re.compile(r"^(?i:mgmt|management|loopback|vlan|lo\d|nve|tunnel)")


@dataclass(frozen=True)
class Facts:
    name: str
    l2: bool
    shutdown: bool
    mode: str
    access: int
    native: int
    allowed: frozenset[int]
    group: int | None


def facts(dialect: str, name: str, body: list[str]) -> Facts:
    allowed: set[int] | None = None
    mode, access, native, group = "access", 1, 1, None
    explicit = "switchport" in body or any(ln.startswith("switchport ") for ln in body)
    for ln in body:
        w = ln.split()
        if ln.startswith("switchport mode "):
            mode = w[2]
        elif ln.startswith("switchport access vlan "):
            access = int(w[3])
        elif ln.startswith("switchport trunk native vlan "):
            native = int(w[4])
        elif ln.startswith("switchport trunk allowed vlan "):
            rest = w[4:]
            verb = rest[0] if rest[0] in ("add", "remove", "except") else ""
            vl = set(parse_vlan_list(" ".join(rest[1:] if verb else rest)))
            if verb == "add":
                allowed = (allowed if allowed is not None else set()) | vl
            elif verb == "remove":
                allowed = (allowed if allowed is not None else set(ALL)) - vl
            else:
                allowed = set(ALL) - vl if verb == "except" else vl
        elif m := re.match(r"channel-group (\d+)", ln):
            group = int(m[1])
    routed = "no switchport" in body or _NOT_L2.match(name) is not None
    l2 = not routed and (explicit or group is not None or dialect == "eos")
    return Facts(
        name, l2, "shutdown" in body, mode, access, native, frozenset(ALL if allowed is None else allowed), group
    )


def _ranges(vs: frozenset[int]) -> str:
    return VlanListStyle().format(vs)


def _nxos(fs: list[Facts], which: str) -> str:
    pcs = {int(m[1]): f for f in fs if (m := re.fullmatch(r"port-channel(\d+)", f.name))}
    rows: list[dict[str, Any]] = []
    for f in fs:
        if which.endswith("switchport | json"):
            if f.l2:
                src = pcs.get(f.group, f) if f.group is not None else f
                rows.append({
                    "interface": f.name, "switchport": "Enabled", "oper_mode": src.mode,
                    "access_vlan": src.access, "access_vlan_name": "default" if src.access == 1 else f"VLAN{src.access:04d}",
                    "native_vlan": src.native, "native_vlan_name": "default" if src.native == 1 else f"VLAN{src.native:04d}",
                    "trunk_vlans": _ranges(src.allowed),
                })  # fmt: skip
            continue
        row: dict[str, Any] = {"interface": f.name, "state": "down" if f.shutdown else "up",
                               "admin_state": "down" if f.shutdown else "up"}  # fmt: skip
        if f.l2 or not _NOT_L2.match(f.name):
            row["eth_mode"] = (pcs.get(f.group, f) if f.group is not None else f).mode if f.l2 else "routed"
        if f.group is not None:
            row["eth_bundle"] = f"Po{f.group}"
        rows.append(row)
    return json.dumps({"TABLE_interface": {"ROW_interface": rows[0] if len(rows) == 1 else rows}}, indent=2)


def _eos(fs: list[Facts], which: str) -> str:
    pcs = {int(m[1]): f for f in fs if (m := re.fullmatch(r"Port-Channel(\d+)", f.name))}
    if which.endswith("switchport | json"):
        sps = {}
        for f in fs:
            if f.l2 and f.group is None:
                sps[f.name] = {"enabled": True, "switchportInfo": {
                    "mode": f.mode, "accessVlanId": f.access, "accessVlanName": "default" if f.access == 1 else f"VLAN{f.access:04d}",
                    "trunkingNativeVlanId": f.native, "trunkAllowedVlans": "ALL" if f.allowed == ALL else _ranges(f.allowed),
                    "macLearning": True, "tpid": "0x8100",
                }}  # fmt: skip
        return json.dumps({"sourceDetail": "", "switchports": sps}, indent=3)
    ifs: dict[str, Any] = {}
    for f in fs:
        i: dict[str, Any] = {"name": f.name, "interfaceStatus": "disabled" if f.shutdown else "connected",
                             "forwardingModel": "bridged" if f.l2 else "routed"}  # fmt: skip
        if f.group is not None:
            i["forwardingModel"] = "dataLink"
            i["interfaceMembership"] = f"Member of {pcs[f.group].name if f.group in pcs else f'Port-Channel{f.group}'}"
        ifs[f.name] = i
    return json.dumps({"interfaces": ifs}, indent=3)


def show_json(dialect: str, command: str, blocks: dict[str, list[str]]) -> str:
    fs = [facts(dialect, name, body) for name, body in blocks.items()]
    return (_nxos(fs, command) if dialect == "nxos" else _eos(fs, command)) + "\n"
