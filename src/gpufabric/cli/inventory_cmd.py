"""``gpufabric inventory import FILE``: YAML/JSON inventory files and real ibnetdiscover output."""

from __future__ import annotations

import dataclasses
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer
import yaml

from gpufabric.cli.common import JSON_OPT, fabrics_path, open_store
from gpufabric.cli.output import console, emit_json, escape, jsonable
from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.models import Inventory, Node
from gpufabric.domain.values import Guid

app = typer.Typer(no_args_is_help=True)


class Format(StrEnum):
    yaml = "yaml"
    json = "json"
    ibnetdiscover = "ibnetdiscover"


def _guess(path: Path) -> Format:
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return Format.yaml
    if suffix == ".json":
        return Format.json
    return Format.ibnetdiscover


def merge_ib_ports(existing: list[Node], ib_inventory: Inventory) -> Inventory:
    """Attach IB ports found on the fabric to the known nodes, keeping their other ports."""
    by_name = {n.name: n for n in existing}
    merged = []
    for found in ib_inventory.nodes:
        old = by_name.get(found.name)
        merged.append(dataclasses.replace(old, ib=found.ib) if old else found)
    return Inventory(tuple(merged))


def load_ibnetdiscover(path: Path) -> Inventory:
    from gpufabric.fabrics.infiniband.ibnetdiscover import ib_ports_from_topology, parse_ibnetdiscover

    ports = ib_ports_from_topology(parse_ibnetdiscover(path.read_text()))
    names = sorted({p.node for p in ports})
    return Inventory(tuple(Node(name, ib=tuple(p for p in ports if p.node == name)) for name in names))


@app.command("import")
def import_(
    file: Path = typer.Argument(..., exists=False),
    fmt: Format = typer.Option(None, "--format", help="yaml, json or ibnetdiscover (default: by file suffix)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Register nodes and ports. ibnetdiscover output (its default format: `-p` output has no CA
    node GUIDs and is refused) adds IB ports to nodes matched by node description "HOSTNAME DEVICE"."""
    if not file.is_file():
        raise ValidationError("file", str(file), "an existing, readable file")
    from gpufabric.service.inventory import check_guid_moves, load_inventory, mark_sm_hosts

    fmt = fmt or _guess(file)
    fabrics = _fabrics_yaml()
    store = open_store()
    sm_hosts: tuple[str, ...] = ()
    if fmt is Format.ibnetdiscover:
        known = store.nodes()
        found = load_ibnetdiscover(file)
        check_guid_moves(found, known)
        inv, sm_hosts = mark_sm_hosts(merge_ib_ports(known, found), _sm_guids(fabrics))
    else:
        inv = load_inventory(file, fmt.value, _dialects(fabrics))
    result = store.upsert_inventory(inv)
    if json_out:
        emit_json({"format": fmt.value, "nodes": len(inv.nodes), "sm_hosts": list(sm_hosts), "result": jsonable(result)})
    else:
        console.print(f"imported {len(inv.nodes)} nodes from {escape(str(file))} ({fmt.value}): {result}")
        for h in sm_hosts:
            console.print(f"{escape(h)} holds the trusted SM's port: in maintenance, never leasable")


def _fabrics_yaml() -> dict[str, Any]:
    path = fabrics_path()
    if not path.exists():
        return {}
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError("fabrics", str(path), "valid YAML", str(e).splitlines()[0]) from None
    return raw if isinstance(raw, dict) else {}


def _dialects(fabrics: dict[str, Any]) -> dict[str, str]:
    """switch -> CLI dialect of every Ethernet driver in fabrics.yaml (ovsdb speaks ``ovs`` names)."""
    out: dict[str, str] = {}
    for e in fabrics.get("ethernet") or []:
        o = (e or {}).get("options") or {}
        if o.get("switch"):
            out[str(o["switch"])] = "ovs" if e.get("driver") == "ovsdb" else str(o.get("dialect", ""))
    return out


def _sm_guids(fabrics: dict[str, Any]) -> list[Guid]:
    raw = [*(fabrics.get("sm_port_guids") or []), *(fabrics.get("trusted_sm_guids") or [])]
    return [Guid.parse(g, field="sm_port_guids") for g in raw]
