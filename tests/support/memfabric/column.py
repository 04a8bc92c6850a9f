"""The memory fabric's own column (inventory mode): its port values, the inventory section's
parser and dump (the kind's own validation), its segment pool, its API fragment and its
table cell — everything the core asks a kind without a typed table for.

Inventory section of a node entry::

    fabrics:
      mem-a: [{name: m0, link: 7}, {name: m1, link: 8}]

``name``: the port on the node (1-15 chars a-z 0-9 -, unique per node); ``link``: the memory
"switch port" it is cabled to, 1-4096, unique across the instance (``port_keys``).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from gpufabric.domain.errors import ExhaustedError, ValidationError
from gpufabric.domain.models import Segment

PORT_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,14}")
NAME_ALLOWED = "1-15 chars of a-z 0-9 -, starting alphanumeric"
LINKS = range(1, 4097)
SEGMENTS = range(1, 4095)


@dataclass(frozen=True, order=True)
class MemPort:
    """One port of a node on one memory-fabric instance."""

    name: str
    link: int


def parse(node: str, raw: Any, where: str) -> tuple[MemPort, ...]:
    if not isinstance(raw, list):
        raise ValidationError(where, raw, "a list of {name, link} ports")
    out: list[MemPort] = []
    for i, entry in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(entry, Mapping) or set(entry) - {"name", "link"}:
            raise ValidationError(at, entry, "a mapping with keys link, name")
        name, link = entry.get("name"), entry.get("link")
        if not isinstance(name, str) or not PORT_NAME.fullmatch(name):
            raise ValidationError(f"{at}.name", name, NAME_ALLOWED)
        if isinstance(link, bool) or not isinstance(link, int) or link not in LINKS:
            raise ValidationError(f"{at}.link", link, f"an integer {LINKS.start}-{LINKS.stop - 1}")
        if any(p.name == name for p in out):
            raise ValidationError(f"{at}.name", name, f"port names unique per node ({node})", "duplicate")
        out.append(MemPort(name, link))
    return tuple(sorted(out))


def dump(ports: tuple[Any, ...]) -> list[Any]:
    return [{"name": p.name, "link": p.link} for p in ports]


def allocate(instance: str, used: Collection[Segment]) -> Segment:
    taken = {s.seg_id for s in used}
    for seg in SEGMENTS:
        if seg not in taken:
            return Segment(instance, seg)
    raise ExhaustedError(f"no free memory segment left on {instance}", field=f"{instance}.segments")


def view(ports: tuple[MemPort, ...]) -> Mapping[str, Any]:
    return {"ports": dump(ports)} if ports else {}


def summary(ports: tuple[MemPort, ...]) -> str:
    return " ".join(f"{p.name}:{p.link}" for p in ports)
