"""Inventory files: YAML or JSON text -> domain :class:`Inventory` (schema: docs/inventory.md).

``parse_inventory(text, fmt)`` is the pure parser; ``load_inventory(path, fmt)`` reads
a file. Every error is a :class:`ValidationError` whose field is the path of the bad
value in the file (e.g. ``nodes[2].ib[0].port_guid``) and whose ``allowed`` says the
accepted form. YAML is read with YAML 1.2-style scalars: ``52:54:00:12:34:56`` and
``0000:18:00.0`` stay strings (PyYAML's YAML 1.1 would read them as base-60 numbers),
``0x...`` is a hexadecimal integer, and only true/false are booleans.

A node entry's ``fabrics: {<instance>: [...]}`` section holds its ports on fabric instances
whose kind has no typed table (``FabricKind.ports_section``): each is handed to its kind's
``parse_ports`` (the kind's own validation, fields under ``nodes[i].fabrics.<instance>``),
dumped back as canonical JSON (:class:`~gpufabric.domain.models.FabricPorts`), and its
``port_keys`` checked unique across the file. ``instances`` (instance -> bound kind, from
``fabrics.yaml``) says which instances exist, and each registered kind with such a section
adds its default instance when none of that name is configured; any other is refused. A kind's
``inventory_key`` (the DPU kind's ``dpus``) is a node entry's own key for the entries of that
kind's default instance, read the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

import yaml

from gpufabric.domain.entries import listed, mapping, required, short
from gpufabric.domain.errors import ValidationError
from gpufabric.domain.fabric import FabricKind
from gpufabric.domain.models import EthernetPort, FabricPorts, IbPort, Inventory, Node
from gpufabric.domain.values import Guid, PortNaming, check_mac, check_name, check_port_name
from gpufabric.store.registry import registered_kinds

FORMATS: Final = ("yaml", "json")
SCHEMA_VERSION: Final = 1
T = TypeVar("T")
Instances = Mapping[str, FabricKind[Any, Any]]
"""Fabric instance name -> its bound kind (the instances of ``fabrics.yaml``)."""
NODE_KEYS: Final = frozenset({"name", "offering", "ethernet", "ib", "fabrics"})
"""A node entry's own keys; each registered kind's ``inventory_key`` comes beside them."""


def port_instances(instances: Instances, kinds: Iterable[FabricKind[Any, Any]] | None = None) -> dict[str, FabricKind[Any, Any]]:
    """The instances a node's ports may name: ``instances``, and the default instance of each
    of ``kinds`` (default: the registered ones) that keeps ports in the generic table, unless
    an instance of that name is configured."""
    extra = {k.name: k for k in (registered_kinds() if kinds is None else kinds) if k.ports_section}
    return {**{n: k for n, k in extra.items() if n not in instances}, **instances}


class _Yaml12Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema scalars (no base 60, no yes/no/on/off, no timestamps)."""

    yaml_implicit_resolvers: dict[Any, Any] = {}


for _tag, _regex, _first in (
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("int", r"^(?:[-+]?(?:0|[1-9][0-9]*)|0x[0-9a-fA-F]+)$", "-+0123456789"),
    ("float", r"^[-+]?(?:\.[0-9]+|(?:0|[1-9][0-9]*)(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$", "-+0123456789."),
    ("null", r"^(?:~|null|Null|NULL|)$", "~nN"),
):
    _Yaml12Loader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(_regex), [*_first])
_Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^$"), [""])


def load_inventory(
    path: Path | str, fmt: str | None = None, dialects: Mapping[str, PortNaming] | None = None, instances: Instances | None = None
) -> Inventory:
    """Read an inventory file; ``fmt`` is "yaml" or "json" and defaults to the suffix (.json is JSON, anything else YAML)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValidationError("inventory", str(p), "a readable UTF-8 YAML or JSON file", str(e)) from None
    return parse_inventory(text, fmt or ("json" if p.suffix.lower() == ".json" else "yaml"), dialects, instances)


def parse_inventory(
    text: str, fmt: str = "yaml", dialects: Mapping[str, PortNaming] | None = None, instances: Instances | None = None,
    kinds: Iterable[FabricKind[Any, Any]] | None = None,
) -> Inventory:
    """Parse inventory text (pure); ``dialects`` (switch -> its dialect's port naming) checks port names per dialect."""
    if fmt == "json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValidationError("inventory", f"line {e.lineno} column {e.colno}", "valid JSON", e.msg) from None
    elif fmt == "yaml":
        try:
            data = yaml.load(text, Loader=_Yaml12Loader)  # a SafeLoader subclass
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f"line {mark.line + 1} column {mark.column + 1}" if mark else "?"
            raise ValidationError("inventory", where, "valid YAML", str(getattr(e, "problem", e))) from None
    else:
        raise ValidationError("format", fmt, "yaml or json")
    return inventory_from_dict(data, dialects, instances, kinds)


def inventory_from_dict(
    data: Any, dialects: Mapping[str, PortNaming] | None = None, instances: Instances | None = None,
    kinds: Iterable[FabricKind[Any, Any]] | None = None,
) -> Inventory:
    """Build an Inventory from decoded YAML/JSON data (pure); see docs/inventory.md.

    ``dialects`` maps switch names to their CLI dialect's port naming (the dialect from fabrics.yaml, its
    ``port_names`` from the dialect's own file): a port name the switch's dialect would not accept is
    refused here, not later at render time. ``kinds``: the registered kinds (default: the entry
    points'), whose default instances and inventory keys a node entry may use."""
    top = mapping("inventory", data, {"version", "nodes"})
    version = top.get("version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise ValidationError("version", version, str(SCHEMA_VERSION))
    raw_nodes = listed("nodes", top.get("nodes", []))
    named = port_instances(instances or {}, kinds)
    keyed = {k.inventory_key: k for k in named.values() if k.inventory_key and k.instance == k.name}  # once per file
    nodes: list[Node] = []
    first: dict[tuple[str, Any], str] = {}  # unique key -> path of its first use
    for i, raw in enumerate(raw_nodes):
        node = _node(f"nodes[{i}]", raw, dialects or {}, named, keyed, first)
        _unique(first, ("node", node.name), f"nodes[{i}].name", node.name, "node names")
        for k, p in enumerate(node.ethernet):
            path = f"nodes[{i}].ethernet[{k}]"
            _unique(first, ("nic", (node.name, p.name)), f"{path}.name", p.name, "NIC names per node")
            sp = f"{p.switch}/{p.switch_port}"
            _unique(first, ("switch_port", (p.switch, p.switch_port)), f"{path}.switch_port", sp, "switch ports")
        _check_bonds(f"nodes[{i}]", node, first)
        for k, q in enumerate(node.ib):
            path = f"nodes[{i}].ib[{k}]"
            key = ("hca", (node.name, q.device, q.port_num))
            _unique(first, key, f"{path}.device", f"{q.device}/{q.port_num}", "device/port_num per node")
            _unique(first, ("guid", q.port_guid), f"{path}.port_guid", str(q.port_guid), "port GUIDs")
            owner = first.setdefault(("node_guid", q.node_guid), node.name)
            if owner != node.name:
                raise ValidationError(
                    f"{path}.node_guid", str(q.node_guid), f"node GUIDs unique per node (also on node {owner})", "duplicate"
                )
        nodes.append(node)
    return Inventory(tuple(nodes))


# ---------------------------------------------------------------------- one node
def _node(path: str, raw: Any, dialects: Mapping[str, PortNaming], instances: Instances, keyed: Instances,
          first: dict[tuple[str, Any], str]) -> Node:  # fmt: skip
    """One node entry; ``keyed``: each kind's own key of a node entry -> that kind's default instance."""
    m = mapping(path, raw, NODE_KEYS | keyed.keys())
    name = _name(f"{path}.name", required(path, m, "name"))
    offering = m.get("offering", "")
    if offering != "":
        _name(f"{path}.offering", offering)
    return Node(
        name,
        offering=offering,
        ethernet=tuple(_ethernet(f"{path}.ethernet[{k}]", name, r, dialects) for k, r in _items(path, m, "ethernet")),
        ib=tuple(_ib(f"{path}.ib[{k}]", name, r) for k, r in _items(path, m, "ib")),
        fabric_ports=_fabric_ports(path, name, m, instances, keyed, first),
    )


def _check_bonds(path: str, node: Node, first: dict[tuple[str, Any], str]) -> None:
    """A bond is one node's: on one switch or an MLAG/vPC pair (two), one mode, never another
    node's aggregate, and its aggregate is not also some NIC's plain switch port."""
    groups: dict[str, list[EthernetPort]] = {}
    for p in node.ethernet:
        if p.bond:
            groups.setdefault(p.bond, []).append(p)
    plain = {(p.switch, p.switch_port) for p in node.ethernet}
    for k, p in enumerate(node.ethernet):
        at = f"{path}.ethernet[{k}]"
        if not p.bond:
            continue
        members = groups[p.bond]
        switches = sorted({m.switch for m in members})
        if len(switches) > 2:
            raise ValidationError(f"{at}.bond", p.bond, "members on one switch or an MLAG/vPC pair (2 switches)",
                                  f"on {', '.join(switches)}")
        if len({m.bond_mode for m in members}) > 1:
            raise ValidationError(f"{at}.bond_mode", p.bond_mode, f"the same mode on every member of {p.bond}")
        if (p.switch, p.bond) in plain:
            raise ValidationError(f"{at}.bond", p.bond, f"an aggregate that is not a member port on {p.switch}")
        owner = first.setdefault(("bond", (p.switch, p.bond)), node.name)
        if owner != node.name:
            raise ValidationError(f"{at}.bond", f"{p.switch}/{p.bond}", "an aggregate of this node only",
                                  f"it is node {owner}'s")


def _fabric_ports(
    path: str, node: str, m: Mapping[str, Any], instances: Instances, keyed: Instances, first: dict[tuple[str, Any], str]
) -> tuple[FabricPorts, ...]:
    """The node's ``fabrics`` section (one entry per instance, parsed by the instance's kind) and
    its kinds' own keys (``keyed``: inventory key -> the kind's default instance)."""
    raw = m.get("fabrics")
    sections = {n: k for n, k in instances.items() if k.ports_section}
    allowed = ", ".join(sorted(sections)) or "none configured"
    if raw is not None and not isinstance(raw, Mapping):
        raise ValidationError(f"{path}.fabrics", short(raw), f"a mapping of fabric instance to its ports ({allowed})")
    found = [(f"{path}.fabrics.{i}", str(i), e, sections.get(i)) for i, e in sorted((raw or {}).items(), key=lambda kv: str(kv[0]))]
    found += [(f"{path}.{key}", k.instance, m[key], k) for key, k in sorted(keyed.items()) if m.get(key)]
    out: dict[str, FabricPorts] = {}
    for where, instance, entries, kind in found:
        if kind is None:
            raise ValidationError(where, short(entries), f"a fabric instance with an inventory section: {allowed}")
        if instance in out:
            raise ValidationError(where, short(entries), f"the node's ports on {instance} in one place: "
                                  f"{kind.inventory_key} or fabrics.{instance}, not both")  # fmt: skip
        ports = kind.parse_ports(node, entries, where)
        for key in kind.port_keys(ports):
            _unique(first, ("fabric", (instance, key)), where, key, f"ports on fabric {instance}")
        out[instance] = FabricPorts.of(instance, kind.dump_ports(ports))
    return tuple(out[i] for i in sorted(out))


def _ethernet(path: str, node: str, raw: Any, dialects: Mapping[str, PortNaming]) -> EthernetPort:
    m = mapping(path, raw, {"name", "switch", "switch_port", "mac", "bond", "bond_mode"})
    nic = _text(f"{path}.name", required(path, m, "name"), "the NIC name on the host, e.g. eth0")
    nic = _checked(f"{path}.name", m["name"], lambda: check_port_name(f"{path}.name", nic))
    switch = _text(f"{path}.switch", required(path, m, "switch"), "the switch name")
    switch = _checked(f"{path}.switch", m["switch"], lambda: check_port_name(f"{path}.switch", switch))
    port = required(path, m, "switch_port")
    if isinstance(port, int) and not isinstance(port, bool):
        port = str(port)
    port = _text(f"{path}.switch_port", port, "the switch port name, e.g. Ethernet12 or 1/1/12")
    port = _checked(f"{path}.switch_port", m["switch_port"], lambda: check_port_name("", port, dialects.get(switch)))
    mac = m.get("mac", "")
    if mac != "":
        allowed = "six colon-separated hex octets as a string, e.g. 52:54:00:12:34:56"
        mac = _checked(f"{path}.mac", mac, lambda: check_mac(f"{path}.mac", _text(f"{path}.mac", mac, allowed)))
    bond, mode = m.get("bond", ""), m.get("bond_mode", "")
    if bond != "":
        bond = _text(f"{path}.bond", bond, "the switch's aggregate interface, e.g. Port-Channel10, ae3, bond0")
        bond = _checked(f"{path}.bond", m["bond"], lambda: check_port_name("", bond, dialects.get(switch)))
        mode = mode or "lacp"
    if mode not in (("lacp", "active-backup") if bond else ("",)):
        raise ValidationError(f"{path}.bond_mode", mode, "lacp or active-backup" if bond else "only with bond")
    return EthernetPort(node, nic, switch, port, mac, bond, mode)


def _ib(path: str, node: str, raw: Any) -> IbPort:
    m = mapping(path, raw, {"device", "port_num", "port_guid", "node_guid", "switch_guid", "switch_port", "instance"})
    device = _text(f"{path}.device", required(path, m, "device"), "the HCA device name, e.g. mlx5_0")
    port_num = _int(f"{path}.port_num", m.get("port_num", 1), 1, 254)
    port_guid = _guid(f"{path}.port_guid", required(path, m, "port_guid"))
    node_guid = _guid(f"{path}.node_guid", required(path, m, "node_guid"))
    sw_guid = None if m.get("switch_guid") is None else _guid(f"{path}.switch_guid", m["switch_guid"])
    sw_port = None if m.get("switch_port") is None else _int(f"{path}.switch_port", m["switch_port"], 1, 254)
    instance = m.get("instance") or ""  # the IB fabric instance (subnet); "": the default one
    if instance:
        _checked(f"{path}.instance", instance, lambda: check_name(f"{path}.instance", instance))
    return IbPort(node, device, port_num, port_guid, node_guid, sw_guid, sw_port, instance)


# ---------------------------------------------------------------------- field helpers


def _items(path: str, m: Mapping[str, Any], key: str) -> list[tuple[int, Any]]:
    raw = m.get(key)
    return [] if raw is None else list(enumerate(listed(f"{path}.{key}", raw)))


def _text(path: str, raw: Any, allowed: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise ValidationError(path, raw, f"a non-empty string: {allowed}")
    return raw.strip()


def _name(path: str, raw: Any) -> str:
    return _checked(path, raw, lambda: check_name(path, raw))


def _int(path: str, raw: Any, lo: int, hi: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not lo <= raw <= hi:
        raise ValidationError(path, raw, f"an integer {lo}-{hi}")
    return raw


def _guid(path: str, raw: Any) -> Guid:
    if isinstance(raw, bool) or not isinstance(raw, (int, str)):
        raise ValidationError(path, raw, Guid.ALLOWED)
    g = Guid.parse(raw, field=path)
    if g.value in (0, 0xFFFF_FFFF_FFFF_FFFF):
        raise ValidationError(path, raw, f"{Guid.ALLOWED}, not 0 and not all ones", "reserved GUID")
    return g


def _checked(path: str, raw: Any, fn: Callable[[], T]) -> T:
    """Run a domain check; re-raise its error under ``path`` with the raw value."""
    try:
        return fn()
    except ValidationError as e:
        raise ValidationError(path, raw, e.allowed) from None


def _unique(first: dict[tuple[str, Any], str], key: tuple[str, Any], path: str, value: Any, what: str) -> None:
    if key in first:
        raise ValidationError(path, value, f"unique {what} (also at {first[key]})", "duplicate")
    first[key] = path


# ---------------------------------------------------------------------- imports against the store
def check_port_keys(found: Inventory, known: Iterable[Node], instances: Instances) -> None:
    """Refuse an import that gives a generic-table port key (``FabricKind.port_keys``) the store
    knows on another node to a node of ``found`` (the typed tables' database constraints, for
    kinds without one; the nodes of ``found`` replace their stored ports)."""
    replaced = {n.name for n in found.nodes}
    owner: dict[tuple[str, Any], str] = {}
    for n in known:
        if n.name in replaced:
            continue
        for fp in n.fabric_ports:
            if (kind := instances.get(fp.instance)) is not None and kind.ports_section:
                owner.update({(fp.instance, key): n.name for key in kind.port_keys(kind.ports(n))})
    for i, n in enumerate(found.nodes):
        for fp in n.fabric_ports:
            kind = instances.get(fp.instance)
            for key in kind.port_keys(kind.ports(n)) if kind is not None else ():
                if (was := owner.get((fp.instance, key))) is not None:
                    raise ValidationError(f"nodes[{i}].fabrics.{fp.instance}", key,
                                          f"ports unique on fabric {fp.instance} (node {was} has it)", "duplicate")  # fmt: skip
