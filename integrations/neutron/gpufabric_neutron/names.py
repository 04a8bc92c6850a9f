"""Pure mapping from Neutron objects to gpufabric names and segments (no I/O, no neutron).

- A Neutron project becomes a gpufabric tenant: its id when that is a valid gpufabric name
  (1-63 chars of a-z 0-9 . _ -), else ``os-`` + a stable hash.
- A Neutron network becomes the gpufabric network ``neutron-<first 12 hex digits of its id>``
  (short, because gpufabric derives the OpenSM partition name from tenant and network and
  OpenSM allows 31 characters; a collision within one project would show as a 409 with other
  segments and fail loudly, never share a network).
- A segment is gpufabric's only when it is a VLAN segment on one of its physnets
  (:mod:`gpufabric_neutron.physnets`): ``{"fabric": INSTANCE, "seg_id": N}``, the Ethernet
  VLAN or the InfiniBand fake VLAN (gpufabric maps it to a PKey of that subnet). Every other
  segment is left to other drivers, so an Ethernet switch never receives an IB network and
  the reverse.
- A Neutron network's name and description become its gpufabric network's description, and
  its tags (those gpufabric's tags can hold) its tags, on every network update (:func:`about`).
- ``binding:host_id`` (what Ironic sends: the node's UUID) names the gpufabric node: its entry
  in the operator's node map (``{host id: node name}``, the file the esi-leap sync reads too),
  else the host id itself when it is a valid gpufabric node name.
- ``local_link_information`` (what Ironic sends) names the node's switch port, or for
  InfiniBand the port GUID. Each of its links must be a port of the host's node
  (:func:`foreign_links`), for InfiniBand on the segment's own subnet: link info alone never
  chooses the node, and an HCA of the storage subnet never binds a compute-subnet segment.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpufabric_neutron.physnets import ETHERNET as ETHERNET
from gpufabric_neutron.physnets import INFINIBAND as INFINIBAND
from gpufabric_neutron.physnets import Physnets as Physnets

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


DESCRIPTION_MAX = 255
TAG_ALLOWED = "1-60 chars of A-Z a-z 0-9 . _ : = @ + -, at most 32"  # gpufabric's network tags
_TAG_RE = re.compile(r"^[A-Za-z0-9._:=@+-]{1,60}$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]+")


def about(net: Mapping[str, Any]) -> dict[str, Any]:
    """What a Neutron network tells gpufabric's of itself (``PATCH``): ``description``, its Neutron
    name and description (``name: description``, one line, at most 255 characters), and
    ``tags``, the Neutron tags gpufabric's tags can hold (the first 32)."""
    name, text = str(net.get("name") or ""), str(net.get("description") or "")
    line = _CONTROL_RE.sub(" ", f"{name}: {text}" if name and text else name or text)
    tags = [t for t in net.get("tags") or () if isinstance(t, str) and _TAG_RE.match(t)]
    return {"description": line[:DESCRIPTION_MAX], "tags": list(dict.fromkeys(tags))[:32]}


def dropped_tags(net: Mapping[str, Any]) -> list[str]:
    """The Neutron tags :func:`about` leaves out."""
    kept = set(about(net)["tags"])
    return [str(t) for t in net.get("tags") or () if t not in kept]


def node_name(host_id: str | None, node_map: Mapping[str, str]) -> str | None:
    """The gpufabric node a port's ``binding:host_id`` names, or None (no host, or not a
    valid node name and not in ``node_map``)."""
    if not host_id:
        return None
    name = node_map.get(host_id, host_id)
    return name if isinstance(name, str) and _NAME_RE.match(name) else None


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


def links(profile: Mapping[str, Any] | None, fabric: str) -> list[tuple[LinkRef, ...]]:
    """Each usable link of a port's ``binding:profile``: the ways it can name a port, most
    specific first. Ethernet: (switch_info, port_id) then (switch_id, port_id). InfiniBand: the
    port GUID (``port_guid``/``guid`` key, or a GUID-shaped ``port_id``) first, then switch +
    port. A link naming no port is left out."""
    lli = (profile or {}).get("local_link_information") or []
    out: list[tuple[LinkRef, ...]] = []
    for link in lli if isinstance(lli, list) else []:
        if not isinstance(link, Mapping):
            continue
        refs: list[LinkRef] = []
        port = link.get("port_id")
        if fabric == INFINIBAND:
            for raw in (link.get("port_guid"), link.get("guid"), port):
                g = normalize_guid(raw) if isinstance(raw, str) else None
                if g is not None:
                    refs.append(LinkRef(guid=g))
                    break
        if isinstance(port, str) and port:
            for sw in (link.get("switch_info"), link.get("switch_id")):
                if isinstance(sw, str) and sw and LinkRef(switch=sw, port=port) not in refs:
                    refs.append(LinkRef(switch=sw, port=port))
        if refs:
            out.append(tuple(refs))
    return out


def link_refs(profile: Mapping[str, Any] | None, fabric: str) -> list[LinkRef]:
    """Every candidate of :func:`links`, flattened without repeats."""
    seen: set[LinkRef] = set()
    return [r for link in links(profile, fabric) for r in link if not (r in seen or seen.add(r))]  # type: ignore[func-returns-value]


def _owns(ref: LinkRef, ports: Mapping[str, Any], ib_ports: Any) -> bool:
    if ref.guid is not None:
        return any(isinstance(p, Mapping) and isinstance(p.get("port_guid"), str)
                   and normalize_guid(p["port_guid"]) == ref.guid for p in ib_ports or [])  # fmt: skip
    return any(isinstance(p, Mapping) and (p.get("switch"), p.get("switch_port")) == (ref.switch, ref.port)
               for p in ports.get("ethernet") or [])  # fmt: skip


def instance_ib_ports(node: Mapping[str, Any], instance: str | None) -> Any:
    """The node's InfiniBand ports on ``instance``: its ``fabrics.<instance>.ports`` (gpufabric
    lists each IB instance's own HCA ports there), else (an instance it does not show, or no
    instance asked) every IB port (``ports.infiniband``)."""
    view = (node.get("fabrics") or {}).get(instance) if instance else None
    if isinstance(view, Mapping) and isinstance(view.get("ports"), list):
        return view["ports"]
    return (node.get("ports") or {}).get("infiniband") or []


def foreign_links(found: list[tuple[LinkRef, ...]], node: Mapping[str, Any],
                  instance: str | None = None) -> list[tuple[LinkRef, ...]]:  # fmt: skip
    """The links none of whose names is a port of ``node`` (as ``GET /api/v1/nodes/{name}``
    shows it: ``ports.ethernet`` switch + switch_port; the IB port_guids of ``instance``,
    :func:`instance_ib_ports`). Empty: every link is a port of that node (on that subnet)."""
    ports = node.get("ports") or {}
    ib_ports = instance_ib_ports(node, instance)
    return [link for link in found if not any(_owns(r, ports, ib_ports) for r in link)]


def describe(link: tuple[LinkRef, ...]) -> str:
    return " or ".join(r.guid if r.guid else f"{r.switch}/{r.port}" for r in link)
