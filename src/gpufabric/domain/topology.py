"""A port's path up its fabric (issue 31 item 11, NVIDIA NCP NET01-01 "a compute node's backend
switches"): the switch the port is cabled to (its leaf) and, tier by tier, the switches above it
(spine, core), as each fabric kind knows its own topology (the InfiniBand kind from
ibnetdiscover, the Ethernet kind from the uplinks fabrics.yaml declares per switch). A path is
its tiers, leaf first, each tier the names of its switches (a leaf has an uplink to every spine:
a tier has several). Pure values: no I/O."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any, Final

from gpufabric.domain.errors import ValidationError

SwitchPath = tuple[tuple[str, ...], ...]
"""The tiers of switches above a port, the leaf's first (``()``: unknown)."""

TIERS: Final = ("leaf", "spine", "core")
"""What the first tiers are called; a deeper tier is ``tier-N``."""
MAX_TIERS: Final = 8
MAX_TIER_SWITCHES: Final = 512
SWITCH_NAME_ALLOWED: Final = "1-64 printable characters"
PATH_ALLOWED: Final = f"a list of at most {MAX_TIERS} tiers, each a list of 1-{MAX_TIER_SWITCHES} switch names ({SWITCH_NAME_ALLOWED})"
_SWITCH_RE: Final = re.compile(r"[^\x00-\x1f\x7f]{1,64}")


def check_switch_name(field: str, raw: Any) -> str:
    if not isinstance(raw, str) or not _SWITCH_RE.fullmatch(raw):
        raise ValidationError(field, raw, SWITCH_NAME_ALLOWED)
    return raw


def check_path(field: str, raw: Any) -> SwitchPath:
    """A path as an inventory entry or a kind's stored entry gives it (a list of lists of names)."""
    if not isinstance(raw, (list, tuple)) or len(raw) > MAX_TIERS:
        raise ValidationError(field, raw, PATH_ALLOWED)
    out = []
    for i, tier in enumerate(raw):
        if not isinstance(tier, (list, tuple)) or not 1 <= len(tier) <= MAX_TIER_SWITCHES:
            raise ValidationError(f"{field}[{i}]", tier, PATH_ALLOWED)
        out.append(tuple(check_switch_name(f"{field}[{i}][{k}]", s) for k, s in enumerate(tier)))
    return tuple(out)


def tiers_above(leaf: str, uplinks: Mapping[str, Collection[str]]) -> SwitchPath:
    """``leaf`` and the switches above it, tier by tier, following ``uplinks`` (switch -> the
    switches its uplinks go to); a switch already on the path is not visited again."""
    tiers: list[tuple[str, ...]] = [(leaf,)]
    seen = {leaf}
    while len(tiers) < MAX_TIERS:
        above = sorted({u for s in tiers[-1] for u in uplinks.get(s, ()) if u not in seen})
        if not above:
            break
        tiers.append(tuple(above))
        seen.update(above)
    return tuple(tiers)


def tier_name(i: int) -> str:
    return TIERS[i] if i < len(TIERS) else f"tier-{i + 1}"


def path_json(path: SwitchPath) -> list[dict[str, Any]]:
    """A path as the API shows it: ``[{"tier": "leaf", "switches": [...]}, {"tier": "spine", ...}]``."""
    return [{"tier": tier_name(i), "switches": list(tier)} for i, tier in enumerate(path)]


def path_text(path: Any) -> str:
    """A path of the API (:func:`path_json`) as one line: ``leaf-01 -> spine-01|spine-02``."""
    if not isinstance(path, list):
        return ""
    return " -> ".join("|".join(str(s) for s in t.get("switches") or ()) for t in path if isinstance(t, Mapping))
