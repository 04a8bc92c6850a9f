"""Cumulus NVUE (``nv config show -o json`` or startup.yaml) read into port configs; range and comma
interface keys (``bond1-3``, ``swp1,51-54``) merged into each interface they name."""

from __future__ import annotations

import re
from typing import Any, Final

import yaml

from gpufabric.domain.errors import ValidationError
from gpufabric.fabrics.ethernet.readers.portcfg import json_doc, members_of, parse_vlan_list
from gpufabric.fabrics.ethernet.readers.portcfg import port as _port
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode

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
        return json_doc(text, "NVUE configuration")
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
