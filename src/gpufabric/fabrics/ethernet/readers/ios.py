"""Pure parser of IOS-like running configs (NX-OS, EOS, Dell OS10 ``interface`` blocks) into
port configurations, with the defaults applied as each platform applies them and port-channel
members read with their port-channel's VLANs (see :func:`parse_ios`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Final

from gpufabric.fabrics.ethernet.readers.portcfg import ALL_SET, NOT_PORTS, parse_vlan_list
from gpufabric.fabrics.ethernet.readers.portcfg import port as _port
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode

_CHANNEL_GROUP: Final = re.compile(r"^channel-group\s+(?P<n>\d+)(?:\s+force)?(?:\s+mode\s+(?P<mode>\S+))?")
_ROUTED_EVIDENCE: Final = ("ip address", "ipv6 address", "vrf member", "vrf ", "ip unnumbered")


@dataclass(frozen=True)
class BondMember:
    """A switch port that is a member of a port-channel (LACP bond): it carries only
    ``channel-group N``; its VLANs are the port-channel's."""

    port: str
    bond: str  # the port-channel interface (e.g. Port-Channel10, port-channel10)
    lacp_mode: str  # active | passive | on | "" (not given)
    peer_group: str = ""  # "mlag 10" / "vpc 10" when the port-channel spans two switches


def _ios_blocks(text: str) -> tuple[list[tuple[str, list[str]]], bool | None]:
    """``interface`` blocks (name, body lines) and whether an interface without a
    ``(no) switchport`` line is L2 on this switch: True / False / None (unknown).

    NX-OS prints only the non-default form: ``system default switchport`` when stated; else a
    config whose ports say ``no switchport`` and never a bare ``switchport`` has L2 as the
    default (Nexus 9000), one whose ports say ``switchport`` and never ``no switchport`` has
    routed ports as the default (Nexus 7000). Checkpoint lines ``!#<line>`` (the defaults in
    effect, e.g. ``!#switchport``) are read as the port's own lines, not as that evidence."""
    blocks: list[tuple[str, list[str]]] = []
    stated: bool | None = None
    printed = {"switchport": 0, "no switchport": 0}
    for raw in text.splitlines():
        line = raw.rstrip().lstrip("\ufeff")
        m = re.match(r"^interface\s+(\S+)\s*$", line)
        if m:
            blocks.append((m[1], []))
        elif blocks and line[:1] in (" ", "\t"):
            body = line.strip()
            if body in printed and not NOT_PORTS.match(blocks[-1][0]):
                printed[body] += 1
            blocks[-1][1].append(body[2:].strip() if body.startswith("!#") else body)
        elif line.strip() and not line.startswith("!"):
            if line.strip() == "system default switchport":
                stated = True
            elif line.strip() == "no system default switchport":
                stated = False
            if blocks:
                blocks.append(("", []))  # a top-level statement ends the block
    if stated is not None:
        return blocks, stated
    if printed["no switchport"] and not printed["switchport"]:
        return blocks, True
    if printed["switchport"] and not printed["no switchport"]:
        return blocks, False
    return blocks, None


def _ios_port(
    name: str, body: list[str], switch: str, options: dict[str, Any], system_l2: bool | None
) -> EthernetPortConfig | None:
    default_vlan = int(options.get("default_vlan", 1))
    switchport: bool | None = None
    mode, access, native = "access", default_vlan, default_vlan
    allowed: set[int] | None = None
    shutdown = access_removed = evidence_l2 = evidence_l3 = False
    for ln in body:
        words = ln.split()
        if ln == "switchport":
            switchport = True
        elif ln == "no switchport":
            switchport = False
        elif ln == "shutdown":
            shutdown = True
        elif ln == "no shutdown":
            shutdown = False
        elif ln.startswith("switchport mode ") and len(words) >= 3:
            mode, evidence_l2 = words[2], True
        elif ln.startswith("switchport access vlan ") and len(words) >= 4:
            access, access_removed, evidence_l2 = int(words[3]), False, True
        elif ln == "no switchport access vlan":
            access_removed = True
        elif ln.startswith("switchport trunk native vlan ") and len(words) >= 5:
            native, evidence_l2 = int(words[4]), True
        elif ln.startswith("switchport trunk allowed vlan ") and len(words) >= 5:
            evidence_l2 = True
            rest = words[4:]
            verb = rest[0] if rest and rest[0] in ("add", "remove", "except") else ""
            vl = parse_vlan_list(" ".join(rest[1:] if verb else rest))
            if verb == "add":
                allowed = (allowed or set()) | vl
            elif verb == "remove":
                allowed = (allowed if allowed is not None else set(ALL_SET)) - vl
            elif verb == "except":
                allowed = set(ALL_SET - vl)
            else:
                allowed = set(vl)
        elif ln.startswith(_ROUTED_EVIDENCE):
            evidence_l3 = True
    if switchport is None:
        # defaults as the platform applies them: a "switchport ..." subcommand is only accepted
        # on an L2 port, an IP address only on a routed one; else the system default (NX-OS
        # "system default switchport"), else the dialect's (EOS: L2, NX-OS: unknown)
        if evidence_l2 and not evidence_l3:
            switchport = True
        elif evidence_l3:
            switchport = False
        elif system_l2 is not None:
            switchport = system_l2
        elif options.get("l2_requires_switchport"):
            return None
    if switchport is False:
        return None
    if shutdown:
        return _port(switch, name, PortMode.SHUTDOWN)
    if mode == "trunk":
        if allowed is None:
            allowed = set(ALL_SET) if options.get("trunk_default_all", True) else set()
        if options.get("native_is_access_vlan"):
            untagged = None if access_removed else access
            return _port(switch, name, PortMode.TRUNK, untagged, allowed)
        nat = native if native in allowed else None
        return _port(switch, name, PortMode.TRUNK, nat, allowed)
    if mode != "access":  # fex-fabric, dot1q-tunnel, private-vlan ...: not a host port we model
        return None
    return _port(switch, name, PortMode.ACCESS, access)


def _bond_of(body: list[str]) -> tuple[int, str] | None:
    for ln in body:
        if m := _CHANNEL_GROUP.match(ln):
            return int(m["n"]), m["mode"] or ""
    return None


def _port_channels(blocks: list[tuple[str, list[str]]]) -> dict[int, tuple[str, list[str]]]:
    out: dict[int, tuple[str, list[str]]] = {}
    for name, body in blocks:
        if m := re.fullmatch(r"(?i:port-channel)\s*(\d+)", name):
            out[int(m[1])] = (name, body)
    return out


def parse_ios_bonds(text: str) -> tuple[BondMember, ...]:
    """Every ``channel-group`` member of an IOS-like config and its port-channel."""
    blocks, _ = _ios_blocks(text)
    pcs = _port_channels(blocks)
    out: list[BondMember] = []
    for name, body in blocks:
        if not name or (b := _bond_of(body)) is None:
            continue
        n, lacp = b
        style = "port-channel" if any(v[0].startswith("port-channel") for v in pcs.values()) else "Port-Channel"
        pc_name, pc_body = pcs.get(n, (f"{style}{n}", []))  # named as the config names the others
        peer = next((ln for ln in pc_body if re.fullmatch(r"(mlag|vpc)\s+\d+", ln)), "")
        out.append(BondMember(name, pc_name, lacp, peer))
    return tuple(out)


def parse_ios(text: str, switch: str, options: dict[str, Any]) -> tuple[EthernetPortConfig, ...]:
    """Ports of an NX-OS / EOS / OS10 running config. A member of a port-channel (only
    ``channel-group N``) carries the port-channel's VLANs: it is read with the port-channel's
    configuration (its own shutdown aside), never as access VLAN 1; a member of a routed
    port-channel is not read; one of a port-channel the config does not show is read SHUTDOWN
    (no VLAN the config shows), in that channel (the plan refuses to move it, the audit reports
    the missing channel) when its own lines make it a host port, else not read (an NX-OS FEX
    uplink: ``switchport mode fex-fabric`` in a channel the config leaves out, as the N7K 6.2
    real config of tests/fixtures/real/ethernet/nxos/ciscoconfparse-sample_01.nxos has 33 of).
    :func:`parse_ios_bonds` lists the memberships."""
    blocks, system_l2 = _ios_blocks(text)
    pcs = _port_channels(blocks)
    ports: list[EthernetPortConfig] = []
    for name, body in blocks:
        if not name or NOT_PORTS.match(name):
            continue
        if (b := _bond_of(body)) is not None:
            pc = pcs.get(b[0])
            bond = _ios_port(pc[0], pc[1], switch, options, system_l2) if pc else None
            if bond is None and pc is not None:
                continue  # a routed (or unread) port-channel's member: not a host port we model
            if bond is None and _ios_port(name, body, switch, options, system_l2) is None:
                continue  # a channel not shown, and no host port itself (NX-OS FEX uplinks: fex-fabric)
            if bond is None or "shutdown" in body or bond.mode is PortMode.SHUTDOWN:
                ports.append(_port(switch, name, PortMode.SHUTDOWN))
            else:
                ports.append(replace(bond, port=name))
            continue
        if (p := _ios_port(name, body, switch, options, system_l2)) is not None:
            ports.append(p)
    return tuple(ports)
