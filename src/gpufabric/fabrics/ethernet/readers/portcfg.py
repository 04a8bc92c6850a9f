"""VLAN lists and port values shared by the running-config parsers (pure)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, Final

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode

ALL_VLANS: Final = tuple(VlanId(v) for v in range(VlanId.MIN, VlanId.MAX + 1))
ALL_SET: Final = frozenset(range(VlanId.MIN, VlanId.MAX + 1))
NO_QUARANTINE: Final = VlanId(VlanId.MAX)  # placeholder when no quarantine VLAN is known (protected is forced off)
NOT_PORTS: Final = re.compile(r"^(?i:vlan|loopback|lo\d|mgmt|management|nve|tunnel|vxlan|null)")


def parse_vlan_list(text: str) -> frozenset[int]:
    """``"1-3,7"`` / ``"1-3 7"`` / ``"[ 1-3 7 ]"`` / ``"all"`` / ``"none"`` -> VLAN numbers."""
    t = text.strip().strip("[]").strip().lower()
    if t in ("", "none"):
        return frozenset()
    if t == "all":
        return ALL_SET
    out: set[int] = set()
    for part in re.split(r"[,\s]+", t):
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise ValidationError("vlan list", text, "numbers and ranges, e.g. 10,20-30")
        lo, hi = int(m[1]), int(m[2] or m[1])
        out |= set(range(lo, hi + 1))
    return frozenset(v for v in out if VlanId.MIN <= v <= VlanId.MAX)


def vids(vs: Iterable[int]) -> tuple[VlanId, ...]:
    s = frozenset(vs)
    return ALL_VLANS if s == ALL_SET else tuple(VlanId(v) for v in sorted(s))


def port(
    switch: str, name: str, mode: PortMode, vlan: int | None = None, trunks: Iterable[int] = ()
) -> EthernetPortConfig:
    if mode is PortMode.SHUTDOWN:
        return EthernetPortConfig(switch, name, mode)
    t = frozenset(trunks) - ({vlan} if vlan is not None else set())
    return EthernetPortConfig(switch, name, mode, VlanId(vlan) if vlan is not None else None, vids(t))


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
            out.append(replace(port(switch, name, PortMode.SHUTDOWN), bond=bond))
        else:
            out.append(replace(agg, port=name, bond=bond))
    return out


def json_doc(text: str, what: str) -> Any:
    """The JSON document in ``text`` (what a CLI prints before it skipped), or a ValidationError naming ``what``."""
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    try:
        return json.loads(text[start:] if start >= 0 else text)
    except json.JSONDecodeError as e:
        raise ValidationError(what, text[:200], "JSON", str(e)) from e
