"""Ironic as the inventory (issue 34): Ironic's node, port and port group listings (the bodies
of ``GET /v1/nodes?detail=True``, ``/v1/ports?detail=True`` and ``/v1/portgroups?detail=True``)
read into gpufabric's nodes. Pure: text in, an :class:`ImportReport` out; the HTTP side is
:mod:`gpufabric.cli.ironic_source`. The format ``ironic`` (``gpufabric inventory import --from
ironic [LISTING.json]``: the API, or a recorded listing; also behind ``--api``) reads:

- a node by its Ironic ``name`` (a node without a valid name is reported, not imported), its
  Ironic ``uuid`` kept as its identity (``identities``; stored as the node's ``host_id``: what
  Neutron's ``binding:host_id`` names, which the Neutron driver looks the node up by);
- an Ironic port by its ``local_link_connection``: ``switch_info``, else ``switch_id``, must name a
  switch of fabrics.yaml (the switch port naming the kinds declare: :meth:`FabricKind.port_namings`)
  and ``port_id`` that switch's interface; a port without link information, on a switch
  fabrics.yaml does not have, or with an interface name its switch would read otherwise, is
  REPORTED (``unmatched``), never guessed;
- a port group as a bond: its members' aggregate is the group's ``extra.switch_bond``, else its
  ``name``, which must be an interface name of the member's switch (else the member is reported); Linux bonding mode ``802.3ad``/``4`` is LACP, ``active-backup``/``1`` active-backup
  (another mode: the member is reported).

A node Ironic deployed (``active``) while gpufabric holds it in quarantine, or one Ironic
cleans while gpufabric holds it in a tenant, is reported (``disagree``), not changed.

The ports go on the one fabric instance whose kind's entries name a ``switch`` and a
``switch_port`` (``--fabric``: one of several); a node keeps its ports on every other instance
(e.g. HCAs from ibnetdiscover). No fabric kind is named here."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpufabric.domain.errors import GpufabricError, ValidationError
from gpufabric.domain.hooks import ImportEntry, ImportFormat, ImportReport, ImportRequest
from gpufabric.domain.kind.inventory import KindInventory
from gpufabric.domain.models import Inventory, Node, NodeState
from gpufabric.domain.values import PortNaming, check_name

NAME = "ironic"
API_VERSION = "1.88"
"""The ``X-OpenStack-Ironic-API-Version`` the listings are asked in (ports' ``local_link_connection``
1.19, port groups' ``mode`` 1.26, ``physical_network`` 1.34, ports' ``name`` 1.88)."""
LISTINGS = ("nodes", "ports", "portgroups")
MODES = {"802.3ad": "lacp", "4": "lacp", "active-backup": "active-backup", "1": "active-backup"}
LISTED = 20  # unmatched ports the text output lists (--json lists every one)


def import_format() -> ImportFormat:
    """The format, as the ``gpufabric.import_formats`` entry point gives it."""
    return ImportFormat(NAME, read)


@dataclass(frozen=True)
class Listing:
    """Ironic's three listings, each a list of the API's objects."""

    nodes: tuple[Mapping[str, Any], ...]
    ports: tuple[Mapping[str, Any], ...]
    portgroups: tuple[Mapping[str, Any], ...]


def parse_listing(text: str) -> Listing:
    """``{"nodes": ..., "ports": ..., "portgroups": ...}``, each the list of objects or the API's
    own answer body (``{"ports": [...]}``); ValidationError otherwise."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ValidationError("ironic listing", text[:40], f"JSON: {e}") from None
    if not isinstance(doc, Mapping):
        raise ValidationError(
            "ironic listing", type(doc).__name__, 'a mapping {"nodes": [...], "ports": [...], "portgroups": [...]}'
        )
    out: dict[str, tuple[Mapping[str, Any], ...]] = {}
    for key in LISTINGS:
        raw = doc.get(key, [])
        if isinstance(raw, Mapping):  # the API's body: {"ports": [...]}
            raw = raw.get(key, [])
        if not isinstance(raw, list) or not all(isinstance(x, Mapping) and isinstance(x.get("uuid"), str) for x in raw):
            raise ValidationError(f"ironic listing.{key}", str(raw)[:60], f"a list of Ironic {key} (each with a uuid)")
        out[key] = tuple(raw)
    return Listing(out["nodes"], out["ports"], out["portgroups"])


def switched_instance(req: ImportRequest) -> tuple[str, KindInventory, dict[str, PortNaming]]:
    """(instance, bound kind, switch -> naming) the ports go on: the instances whose kind's
    entries name a switch and its port and whose fabrics.yaml names switches; ``--fabric``
    chooses among several. ValidationError when fabrics.yaml has none."""
    mine: dict[str, tuple[KindInventory, dict[str, PortNaming]]] = {}
    for name, kind in req.instances.items():
        if not isinstance(kind, KindInventory):  # a kind without an inventory column
            continue
        props = (kind.entry_schema or {}).get("properties") or {}
        if "switch" in props and "switch_port" in props and (namings := dict(kind.port_namings(req.settings))):
            mine[name] = (kind, namings)
    if not mine:
        raise ValidationError(
            "fabrics.yaml", None, "a fabric instance with switches (what Ironic's local_link_connection names)"
        )
    if req.instance is None and len(mine) > 1:
        raise ValidationError(
            "--fabric", None, f"one of the switched instances of fabrics.yaml: {', '.join(sorted(mine))}"
        )
    name = req.instance if req.instance is not None else next(iter(mine))
    if name not in mine:
        raise ValidationError("--fabric", name, f"a switched instance of fabrics.yaml: {', '.join(sorted(mine))}")
    return name, *mine[name]


def _switch(lli: Mapping[str, Any], namings: Mapping[str, PortNaming]) -> str | None:
    for key in ("switch_info", "switch_id"):
        if isinstance(v := lli.get(key), str) and v in namings:
            return v
    return None


def _port_doc(p: Mapping[str, Any], node: str | None) -> dict[str, Any]:
    lli = p.get("local_link_connection") or {}
    return {"uuid": p["uuid"], "address": p.get("address"), "node": node, "node_uuid": p.get("node_uuid"),
            "switch_id": lli.get("switch_id"), "switch_info": lli.get("switch_info"), "port_id": lli.get("port_id"),
            "physical_network": p.get("physical_network"), "portgroup_uuid": p.get("portgroup_uuid")}  # fmt: skip


def nic_name(p: Mapping[str, Any], node: str) -> str:
    """The NIC's name on the host: ``extra.nic``, else the port's Ironic ``name`` (API 1.88; unique
    across Ironic, so ``NODE-eth0`` is read as ``eth0``), else ``nic-`` and its MAC's hex digits."""
    extra = p.get("extra") or {}
    for v in (extra.get("nic") if isinstance(extra, Mapping) else None, p.get("name")):
        if isinstance(v, str) and v:
            return v[len(node) + 1 :] if v.startswith((f"{node}-", f"{node}.")) and len(v) > len(node) + 1 else v
    return "nic-" + str(p.get("address") or p["uuid"]).replace(":", "").replace("-", "").lower()


def _bond(group: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(aggregate, gpufabric bond mode) of a port group; mode None: not one gpufabric manages."""
    extra = group.get("extra") or {}
    name = extra.get("switch_bond") if isinstance(extra, Mapping) and extra.get("switch_bond") else group.get("name")
    return (str(name) if name else None), MODES.get(str(group.get("mode") or "active-backup"))


def entries(
    listing: Listing, namings: Mapping[str, PortNaming]
) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]], dict[str, str]]:
    """(node name -> its inventory entries, the ports not imported each with ``why``, node name
    -> Ironic UUID). Nodes without a valid name are reported through their ports (``why``) and in
    the identities left out."""
    names: dict[str, str | None] = {}
    unnamed: dict[str, str] = {}
    for n in listing.nodes:
        try:
            names[n["uuid"]] = check_name("ironic node name", n.get("name") or "")
        except ValidationError as e:
            names[n["uuid"]], unnamed[n["uuid"]] = None, f"its Ironic node {n['uuid']} has no usable name ({e})"
    groups = {g["uuid"]: g for g in listing.portgroups}
    per_node: dict[str, list[dict[str, Any]]] = {n: [] for n in names.values() if n}
    skipped: list[dict[str, Any]] = []
    for p in sorted(listing.ports, key=lambda p: (str(p.get("node_uuid")), str(p.get("address")))):
        node = names.get(str(p.get("node_uuid")))
        lli = p.get("local_link_connection") or {}
        doc = _port_doc(p, node)
        why = ""
        if p.get("node_uuid") not in names:
            why = "its node is not in Ironic's node listing"
        elif node is None:
            why = unnamed[str(p["node_uuid"])]
        elif not lli or not lli.get("port_id"):
            why = "no local_link_connection port_id (not discovered, or not an Ethernet switch port)"
        elif (switch := _switch(lli, namings)) is None:
            seen = lli.get("switch_info") or lli.get("switch_id")
            why = f"switch {seen!r} (switch_info/switch_id) is no switch of fabrics.yaml"
        elif not namings[switch].matches(str(lli["port_id"])):
            why = f"port_id {lli['port_id']!r} is not a {namings[switch].dialect} interface name of {switch}"
        else:
            entry: dict[str, Any] = {"name": nic_name(p, node), "switch": switch, "switch_port": str(lli["port_id"])}
            if p.get("address"):
                entry["mac"] = str(p["address"])
            if (gid := p.get("portgroup_uuid")) is not None:
                bond, mode = _bond(groups.get(str(gid), {}))
                if gid not in groups:
                    why = f"its port group {gid} is not in Ironic's port group listing"
                elif bond is None or mode is None:
                    why = (
                        f"port group {gid} mode {groups[gid].get('mode')!r} (gpufabric bonds: 802.3ad or active-backup)"
                    )
                elif not namings[switch].matches(bond):  # e.g. a group named for people, not for the switch
                    why = (f"port group {gid}: {bond!r} (its extra.switch_bond, else its name) is not a "
                           f"{namings[switch].dialect} aggregate name of {switch}: set extra.switch_bond")  # fmt: skip
                else:
                    entry.update(bond=bond, bond_mode=mode)
            if not why:
                per_node[node].append(entry)
                continue
        skipped.append({**doc, "why": why})
    identities = {name: uuid for uuid, name in names.items() if name}
    return per_node, skipped, identities


def read(req: ImportRequest) -> ImportReport:
    """The listing's nodes with their Ethernet ports on the switched instance; every other port
    of a known node kept; the ports not imported reported."""
    listing = parse_listing(req.text)
    instance, kind, namings = switched_instance(req)
    per_node, skipped, identities = entries(listing, namings)
    checked = kind.for_inventory(namings)
    known = {n.name: n for n in req.known()} if per_node or listing.nodes else {}
    nodes: list[Node] = []
    out: list[ImportEntry] = []
    for name in sorted(per_node):
        raw = per_node[name]
        try:
            ports = checked.parse_ports(name, raw, f"ironic node {name}")
        except GpufabricError as e:
            raise ValidationError(f"ironic node {name}", identities[name], str(e)) from None
        nodes.append((known.get(name) or Node(name)).with_ports(checked.stored(ports)))
        out.append(ImportEntry(f"node {name} ({identities[name]})", {"name": name, "uuid": identities[name], "ports": raw},
                               node=name, ports=len(raw)))  # fmt: skip
    lines = [
        f"{name}: Ironic node {identities[name]}, {len(per_node[name])} port(s) on {instance}"
        for name in sorted(per_node)
    ]
    lines += [f"not imported: Ironic port {s['address']} ({s['uuid']}) of {s['node'] or s['node_uuid']}: {s['why']}"
              for s in skipped[:LISTED]]  # fmt: skip
    if len(skipped) > LISTED:
        lines.append(f"... and {len(skipped) - LISTED} more ports not imported (--json lists every one)")
    disagree = disagreements(listing, identities, known)
    lines += [f"{d['node']}: {d['why']}" for d in disagree]
    fields = {"disagree": disagree, "instance": instance, "identities": identities, "imported": [e.doc for e in out], "unmatched": skipped,
              "node_map": {uuid: name for name, uuid in identities.items()}}  # fmt: skip
    host_ids = tuple((n.name, identities[n.name]) for n in nodes)  # the UUID stored as the node's identity
    return ImportReport(Inventory(tuple(nodes), host_ids), tuple(out), lines=tuple(lines), fields=fields)


CLEANING = frozenset({"cleaning", "clean wait", "clean hold", "clean failed"})
"""Ironic's provision states of a node it cleans (what the Neutron driver refuses a tenant join in)."""


def disagreements(listing: Listing, identities: Mapping[str, str], known: Mapping[str, Node]) -> list[dict[str, Any]]:
    """The nodes whose Ironic state and gpufabric's hold disagree: Ironic deployed it
    (``active``) while gpufabric holds it in quarantine (no tenant network reached it through
    gpufabric), or Ironic cleans it while gpufabric holds it in a tenant."""
    out: list[dict[str, Any]] = []
    by_uuid = {uuid: name for name, uuid in identities.items()}
    for n in listing.nodes:
        name, state = by_uuid.get(str(n["uuid"])), n.get("provision_state")
        node = known.get(name) if name else None
        if node is None or not isinstance(state, str):
            continue
        held = node.state is NodeState.LEASED or node.state is NodeState.MOVING
        if state == "active" and node.state is NodeState.AVAILABLE:
            why = "Ironic deployed it (provision_state active) while gpufabric holds it in quarantine"
        elif state in CLEANING and held:
            why = f"Ironic cleans it (provision_state {state}) while gpufabric holds it in a tenant ({node.state.value})"
        else:
            continue
        out.append({"node": name, "uuid": n["uuid"], "provision_state": state, "gpufabric": node.state.value, "why": why})
    return out


def node_map(doc: Mapping[str, Any]) -> dict[str, str]:
    """{Ironic node UUID: gpufabric node} of an import's answer: the Neutron driver's and the
    esi-leap sync's ``node_map`` (docs/openstack.md), written by the import, not by hand."""
    return dict(doc.get("node_map") or {})
