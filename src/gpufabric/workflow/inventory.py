"""Inventory files: YAML or JSON text -> domain :class:`Inventory` (schema: docs/inventory.md).

``parse_inventory(text, fmt)`` is the pure parser; ``load_inventory(path, fmt)`` reads
a file. Every error is a :class:`ValidationError` whose field is the path of the bad
value in the file (e.g. ``nodes[2].ib[0].port_guid``) and whose ``allowed`` says the
accepted form. YAML is read with YAML 1.2-style scalars: ``52:54:00:12:34:56`` and
``0000:18:00.0`` stay strings (PyYAML's YAML 1.1 would read them as base-60 numbers),
``0x...`` is a hexadecimal integer, and only true/false are booleans.

A node entry has a ``name``, an ``offering`` and its ports on each fabric instance. The
ports of a kind's default instance are under the kind's own key (``FabricKind.inventory_key``:
e.g. ``ethernet``, ``ib``, ``gpus``, ``dpus``), those of any instance under ``fabrics:
{<instance>: [...]}``. Each list is handed to its kind's ``parse_ports`` (the kind's own
validation, fields under the path of the list), dumped back as canonical JSON
(:class:`~gpufabric.domain.models.FabricPorts`) with the kind's :class:`PortKey` values, which
no two nodes of the file may share (the store keeps them unique too). ``instances``
(instance -> bound kind, from ``fabrics.yaml``) says which instances exist, and each registered
kind adds its default instance when none of that name is configured; any other is refused.
``dialects`` (device -> the naming of its ports: :func:`port_namings` of ``fabrics.yaml``, for a
file through the CLI and for the API's body alike) is handed to every kind
(``FabricKind.for_inventory``), which checks the port names of its entries against it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from gpufabric.domain.entries import checked, listed, mapping, required, short, unique
from gpufabric.domain.errors import ValidationError
from gpufabric.domain.fabric import FabricKind
from gpufabric.domain.models import FabricPorts, Inventory, Node
from gpufabric.domain.values import PortNaming, check_name
from gpufabric.store.registry import registered_kinds

FORMATS: Final = ("yaml", "json")
SCHEMA_VERSION: Final = 1
Instances = Mapping[str, FabricKind[Any, Any]]
"""Fabric instance name -> its bound kind (the instances of ``fabrics.yaml``)."""
NODE_KEYS: Final = frozenset({"name", "offering", "fabrics"})
"""A node entry's own keys; each registered kind's ``inventory_key`` comes beside them."""


def port_instances(instances: Instances, kinds: Iterable[FabricKind[Any, Any]] | None = None) -> dict[str, FabricKind[Any, Any]]:
    """The instances a node's ports may name: ``instances``, and the default instance of each
    of ``kinds`` (default: the registered ones) that keeps ports in the generic table, unless
    an instance of that name is configured."""
    extra = {k.name: k for k in (registered_kinds() if kinds is None else kinds) if k.ports_section}
    return {**{n: k for n, k in extra.items() if n not in instances}, **instances}


def port_namings(settings: Mapping[str, Any], kinds: Iterable[FabricKind[Any, Any]] | None = None) -> dict[str, PortNaming]:
    """device -> the naming of its ports, from each of ``kinds``' (default: the registered ones)
    reading of ``settings`` (fabrics.yaml's mapping; empty: none): what every way in checks an
    inventory's port names against (``inventory import FILE``, ``POST /api/v1/inventory``)."""
    if not settings:
        return {}
    return {d: n for k in (registered_kinds() if kinds is None else kinds) for d, n in k.port_namings(settings).items()}


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

    ``dialects`` maps devices (e.g. switch names) to the naming of their ports (a switch's CLI
    dialect from fabrics.yaml): a port name the device would not accept is refused here, not
    later at render time. ``kinds``: the registered kinds (default: the entry points'), whose
    default instances and inventory keys a node entry may use."""
    top = mapping("inventory", data, {"version", "nodes"})
    version = top.get("version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise ValidationError("version", version, str(SCHEMA_VERSION))
    raw_nodes = listed("nodes", top.get("nodes", []))
    namings = dialects or {}
    named = {n: k.for_inventory(namings) for n, k in port_instances(instances or {}, kinds).items()}  # once per file
    keyed = {k.inventory_key: k for k in named.values() if k.inventory_key and k.instance == k.name}
    nodes: list[Node] = []
    first: dict[tuple[str, Any], str] = {}  # node name -> path of its first use
    held: dict[tuple[str, str], tuple[str, str]] = {}  # port key -> (node, path of its first use)
    for i, raw in enumerate(raw_nodes):
        node = _node(f"nodes[{i}]", raw, named, keyed, held)
        unique(first, ("node", node.name), f"nodes[{i}].name", node.name, "node names")
        nodes.append(node)
    return Inventory(tuple(nodes))


# ---------------------------------------------------------------------- one node
def _node(path: str, raw: Any, instances: Instances, keyed: Instances, held: dict[tuple[str, str], tuple[str, str]]) -> Node:
    """One node entry; ``keyed``: each kind's own key of a node entry -> that kind's default instance."""
    m = mapping(path, raw, NODE_KEYS | keyed.keys())
    name = _name(f"{path}.name", required(path, m, "name"))
    offering = m.get("offering", "")
    if offering != "":
        _name(f"{path}.offering", offering)
    return Node(name, offering=offering, fabric_ports=_fabric_ports(path, name, m, instances, keyed, held))


def _fabric_ports(
    path: str, node: str, m: Mapping[str, Any], instances: Instances, keyed: Instances, held: dict[tuple[str, str], tuple[str, str]]
) -> tuple[FabricPorts, ...]:
    """The node's ``fabrics`` section (one entry per instance, parsed by the instance's kind) and
    its kinds' own keys (``keyed``: inventory key -> the kind's default instance); every port key
    is the node's alone in the file (``held``: key -> the node and the path that first holds it)."""
    raw = m.get("fabrics")
    sections = {n: k for n, k in instances.items() if k.ports_section}
    allowed = ", ".join(sorted(sections)) or "none configured"
    if raw is not None and not isinstance(raw, Mapping):
        raise ValidationError(f"{path}.fabrics", short(raw), f"a mapping of fabric instance to its ports ({allowed})")
    found = [(f"{path}.fabrics.{i}", str(i), e, sections.get(i)) for i, e in sorted((raw or {}).items(), key=lambda kv: str(kv[0]))]
    found += [(f"{path}.{key}", k.instance, m[key], k) for key, k in sorted(keyed.items()) if m.get(key) not in (None, [])]
    out: dict[str, FabricPorts] = {}
    for where, instance, entries, kind in found:
        if kind is None:
            raise ValidationError(where, short(entries), f"a fabric instance with an inventory section: {allowed}")
        if instance in out:
            raise ValidationError(where, short(entries), f"the node's ports on {instance} in one place: "
                                  f"{kind.inventory_key} or fabrics.{instance}, not both")  # fmt: skip
        ports = kind.parse_ports(node, entries, where)
        stored = kind.stored(ports)
        for key in stored.keys:
            at = f"{where}{key.at}"
            owner, first = held.setdefault((key.scope, key.key), (node, at))
            if owner != node:
                raise ValidationError(at, key.key, f"unique {key.what or 'ports'} (also at {first})", f"duplicate: node {owner} has it")
        if stored.data != "[]":
            out[instance] = stored
    return tuple(out[i] for i in sorted(out))


# ---------------------------------------------------------------------- field helpers


def _name(path: str, raw: Any) -> str:
    return checked(path, raw, lambda: check_name(path, raw))
