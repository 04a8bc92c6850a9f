"""Pure mapping from Neutron objects to gpufabric names and segments (no I/O, no neutron).

- A Neutron project becomes a gpufabric tenant: its id when that is a valid gpufabric name
  (1-63 chars of a-z 0-9 . _ -), else ``os-`` + a stable hash.
- A Neutron network becomes the gpufabric network ``neutron-<first 12 hex digits of its id>``
  (short, because gpufabric derives the OpenSM partition name from tenant and network and
  OpenSM allows 31 characters; a collision within one project would show as a 409 with other
  segments and fail loudly, never share a network).
- A segment is gpufabric's only when it is a VLAN segment on one of its physnets: an
  Ethernet physnet gives ``{"fabric": "ethernet", "seg_id": VLAN}``; the IB physnet gives
  ``{"fabric": "infiniband", "seg_id": fake VLAN}`` (gpufabric maps it to a PKey). Every
  other segment is left to other drivers, so an Ethernet switch never receives an IB network
  and the reverse.
- ``local_link_information`` (what Ironic sends) names the node's switch port, or for
  InfiniBand the port GUID.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

ETHERNET = "ethernet"
INFINIBAND = "infiniband"
NETWORK_PREFIX = "neutron-"

_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$")
_GUID_RE = re.compile(r"^(0x)?[0-9a-f]{16}$")
_GUID_COLON_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){7}$|^[0-9a-f]{4}(:[0-9a-f]{4}){3}$")


def tenant_name(project_id: str) -> str:
    p = (project_id or "").lower()
    if _NAME_RE.match(p):
        return p
    return "os-" + hashlib.sha256((project_id or "").encode()).hexdigest()[:20]


def network_name(network_id: str) -> str:
    return NETWORK_PREFIX + network_id.lower().replace("-", "")[:12]


@dataclass(frozen=True)
class Physnets:
    ethernet: frozenset[str]
    ib: str | None

    def fabric_of(self, segment: Mapping[str, Any]) -> str | None:
        """``ethernet``, ``infiniband`` or None (not gpufabric's) for one Neutron segment."""
        if segment.get("network_type") != "vlan" or segment.get("segmentation_id") is None:
            return None
        phys = segment.get("physical_network")
        if self.ib is not None and phys == self.ib:
            return INFINIBAND
        if phys in self.ethernet:
            return ETHERNET
        return None

    def gpufabric_segments(self, segments: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for s in segments:
            fabric = self.fabric_of(s)
            if fabric is not None:
                out.append({"fabric": fabric, "seg_id": int(s["segmentation_id"])})
        return out


@dataclass(frozen=True)
class LinkRef:
    """One way to find the node: by switch + port, or by InfiniBand port GUID."""

    switch: str | None = None
    port: str | None = None
    guid: str | None = None


def normalize_guid(raw: str) -> str | None:
    g = raw.strip().lower()
    if _GUID_COLON_RE.match(g):
        g = g.replace(":", "")
    if not _GUID_RE.match(g):
        return None
    return "0x" + g.removeprefix("0x")


def link_refs(profile: Mapping[str, Any] | None, fabric: str) -> list[LinkRef]:
    """Candidate lookups from a port's ``binding:profile``, most specific first.

    Ethernet: (switch_info, port_id) then (switch_id, port_id). InfiniBand: the port GUID
    (``port_guid``/``guid`` key, or a GUID-shaped ``port_id``) first, then switch + port.
    """
    lli = (profile or {}).get("local_link_information") or []
    refs: list[LinkRef] = []
    for link in lli:
        if not isinstance(link, Mapping):
            continue
        port = link.get("port_id")
        if fabric == INFINIBAND:
            for raw in (link.get("port_guid"), link.get("guid"), port):
                g = normalize_guid(raw) if isinstance(raw, str) else None
                if g is not None:
                    refs.append(LinkRef(guid=g))
                    break
        if isinstance(port, str) and port:
            for sw in (link.get("switch_info"), link.get("switch_id")):
                if isinstance(sw, str) and sw:
                    refs.append(LinkRef(switch=sw, port=port))
    seen: set[LinkRef] = set()
    return [r for r in refs if not (r in seen or seen.add(r))]  # type: ignore[func-returns-value]
