"""``gpufabric inventory import FILE``: YAML/JSON inventory files and real ibnetdiscover output."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
import yaml

from gpufabric.cli.common import JSON_OPT, fabrics_path, open_store, segment_config
from gpufabric.cli.output import console, emit_json, escape, jsonable
from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.models import IbPort, Inventory, Node
from gpufabric.domain.values import Guid, PortNaming

if TYPE_CHECKING:
    from gpufabric.fabrics.infiniband.ib_match import CaMatch, FabricMatch

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


def merge_ib_ports(
    existing: list[Node], ib_inventory: Inventory, kept: Callable[[Node], tuple[Any, ...]] | None = None
) -> Inventory:
    """Attach IB ports found on the fabric to the known nodes, keeping their other ports (and
    ``kept(node)``: their HCA ports on the other IB instances, one subnet being imported at a time)."""
    by_name = {n.name: n for n in existing}
    merged = []
    for found in ib_inventory.nodes:
        old = by_name.get(found.name)
        keep = () if old is None or kept is None else kept(old)
        merged.append(dataclasses.replace(old, ib=(*keep, *found.ib)) if old else found)
    return Inventory(tuple(merged))


Kept = Callable[[Node], tuple[Any, ...]]


def load_ibnetdiscover(
    path: Path, *, strict: bool = True, subnet: str | None = None, instances: Mapping[str, Any] | None = None
) -> tuple[Inventory, FabricMatch, Kept]:
    """The nodes (with their IB ports) matched in an ibnetdiscover output, the match of every
    node of the fabric, and what a node keeps of its known ports (those on other instances).
    The ports are assigned to the IB instance ``subnet`` of ``instances`` (default: the only
    one; ValidationError naming ``--fabric`` for an unknown one). ``strict``: a CA that does not
    match is a ValidationError."""
    from gpufabric.fabrics.infiniband.ib_match import import_instance, match_fabric, on_instance, ports_off
    from gpufabric.fabrics.infiniband.ibnetdiscover import parse_ibnetdiscover

    instance = import_instance(subnet, instances or {})
    m = match_fabric(parse_ibnetdiscover(path.read_text(errors="replace")))
    ports = m.strict_ports() if strict else m.ports
    by_node: dict[str, list[IbPort]] = {}
    for p in ports:
        by_node.setdefault(p.node, []).append(on_instance(p, instance))
    nodes = tuple(Node(name, ib=tuple(by_node[name])) for name in sorted(by_node))
    return Inventory(nodes), m, lambda node: ports_off(node, instance)


def _ca_doc(c: CaMatch) -> dict[str, object]:
    doc: dict[str, object] = {"kind": c.kind.value, "node_guid": str(c.node_guid) if c.node_guid else None,
                              "description": c.description}  # fmt: skip
    if c.skipped:
        return {**doc, "status": "skipped", "skip": c.skip, "reason": c.reason}
    return {**doc, "status": "matched", "host": c.host, "device": c.device, "ports": c.ports}


def _print_match(m: FabricMatch, limit: int = 20) -> None:
    counts = m.counts()
    console.print("nodes in the fabric: " + ", ".join(f"{escape(k)} {v}" for k, v in counts.items()))
    listed = [c for c in m.cas if c.skipped and c.skip not in ("switch", "router", "sharp-aggregation-node")]
    for c in listed[:limit]:
        console.print(f"skipped CA {c.node_guid} {escape(repr(c.description))}: {escape(c.reason)}")
    if len(listed) > limit:
        console.print(f"... {len(listed) - limit} more skipped CAs (--json lists every node)")


@app.command("import")
def import_(
    file: Path = typer.Argument(..., exists=False),
    fmt: Format = typer.Option(None, "--format", help="yaml, json or ibnetdiscover (default: by file suffix)."),
    strict: bool = typer.Option(
        False, "--strict", help="ibnetdiscover: refuse the whole file if one CA does not match a host."
    ),
    subnet: str | None = typer.Option(
        None, "--fabric", help="ibnetdiscover: the IB fabric instance (subnet) of fabrics.yaml the HCAs are on "
        "(default: the only one); the nodes' ports on other instances are kept."
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Register nodes and ports. ibnetdiscover output (its default format: `-p` output has no CA
    node GUIDs and is refused) adds IB ports to nodes matched by node description "HOSTNAME DEVICE"
    ("gpu-a01 mlx5_0", "gpu-a01 HCA-1"; host names case-insensitive). Switches, SHARP aggregation
    nodes and CAs without a host description are skipped and reported (--json: every node);
    --strict refuses the whole file instead."""
    if not file.is_file():
        raise ValidationError("file", str(file), "an existing, readable file")
    from gpufabric.cli.backend import backend
    from gpufabric.workflow.inventory import check_guid_moves, check_port_keys, load_inventory, mark_sm_hosts

    fmt = fmt or _guess(file)
    r = backend()
    if r and fmt is Format.ibnetdiscover:
        raise ValidationError("format", fmt.value, "yaml or json through --api (ibnetdiscover merges with the local store)")
    fabrics = _fabrics_yaml()
    sm_hosts: tuple[str, ...] = ()
    match: FabricMatch | None = None
    if subnet is not None and fmt is not Format.ibnetdiscover:
        raise ValidationError("--fabric", subnet, "only with --format ibnetdiscover (a YAML/JSON port names its instance)")
    if fmt is Format.ibnetdiscover:
        found, match, kept = load_ibnetdiscover(file, strict=strict, subnet=subnet, instances=_instances(fabrics))
        store = open_store()
        known = store.nodes()
        check_guid_moves(found, known)
        inv, sm_hosts = mark_sm_hosts(merge_ib_ports(known, found, kept), _sm_guids(fabrics))
    else:
        instances = _instances(fabrics)
        inv = load_inventory(file, fmt.value, _dialects(fabrics), instances)
        if not r and any(n.fabric_ports for n in inv.nodes):
            check_port_keys(inv, open_store().nodes(), instances)
    if r:  # parsed and checked here, imported by the server (as the token's principal)
        res = r.post("/inventory", {"version": 1, "nodes": [_node_doc(n) for n in inv.nodes]})
        if json_out:
            emit_json({"format": fmt.value, "nodes": len(inv.nodes), "result": res})
        else:
            console.print(f"imported {len(inv.nodes)} nodes from {escape(str(file))} ({fmt.value}) through the API: "
                          f"{escape(import_line(res))}")  # fmt: skip
        return
    from gpufabric.workflow.actions import Actions

    result = Actions(open_store(), segment_config).import_inventory(LOCAL_ADMIN, inv)
    if json_out:
        extra = {"summary": match.counts(), "cas": [_ca_doc(c) for c in match.cas]} if match else {}
        emit_json({"format": fmt.value, "nodes": len(inv.nodes), "sm_hosts": list(sm_hosts), "result": jsonable(result),
                   **extra})  # fmt: skip
    else:
        if match is not None:
            _print_match(match)
        console.print(f"imported {len(inv.nodes)} nodes from {escape(str(file))} ({fmt.value}): {result}")
        for h in sm_hosts:
            console.print(f"{escape(h)} holds the trusted SM's port: in maintenance, never leasable")


def import_line(res: Any) -> str:
    """The API's import answer ``{added, updated, unchanged}`` as a person reads it (never a dict repr)."""
    if not isinstance(res, dict):
        return str(res)
    return f"{res.get('added', 0)} added, {res.get('updated', 0)} updated, {res.get('unchanged', 0)} unchanged"


def _fabrics_yaml() -> dict[str, Any]:
    path = fabrics_path()
    if not path.exists():
        return {}
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError("fabrics", str(path), "valid YAML", str(e).splitlines()[0]) from None
    return raw if isinstance(raw, dict) else {}


def _instances(fabrics: dict[str, Any]) -> dict[str, Any]:
    """instance -> bound kind of every fabric instance of fabrics.yaml (their inventory sections)."""
    from gpufabric.engine.fabrics import configured_instances
    from gpufabric.store.registry import Registry

    return configured_instances(fabrics, Registry.from_entry_points(drivers=False)) if fabrics else {}


def _dialects(fabrics: dict[str, Any]) -> dict[str, PortNaming]:
    """switch -> the port naming of its CLI dialect (the fabric kind reads its own section of fabrics.yaml)."""
    from gpufabric.fabrics.ethernet.dialects import port_namings

    return port_namings(fabrics)


def _sm_guids(fabrics: dict[str, Any]) -> list[Guid]:
    raw = [*(fabrics.get("sm_port_guids") or []), *(fabrics.get("trusted_sm_guids") or [])]
    return [Guid.parse(g, field="sm_port_guids") for g in raw]


def _node_doc(n: Node) -> dict[str, object]:
    """A node as an inventory document entry (the API's import body)."""
    return {
        "name": n.name,
        **({"offering": n.offering} if n.offering else {}),
        "ethernet": [{"name": p.name, "switch": p.switch, "switch_port": p.switch_port, **({"mac": p.mac} if p.mac else {}),
                      **({"bond": p.bond, "bond_mode": p.bond_mode} if p.bond else {})} for p in n.ethernet],
        "ib": [{"device": p.device, "port_num": p.port_num, "port_guid": str(p.port_guid), "node_guid": str(p.node_guid),
                **({"switch_guid": str(p.switch_guid)} if p.switch_guid else {}),
                **({"switch_port": p.switch_port} if p.switch_port else {}),
                **({"instance": p.instance} if p.instance else {})} for p in n.ib],
        "gpus": [{"module_id": g.module_id.value, **({"pci_bus_id": g.pci_bus_id} if g.pci_bus_id else {})}
                 for g in n.gpus],
        "dpus": [{"name": d.name, "mode": d.mode.value, **dict(d.details)} for d in n.dpus],
        **({"fabrics": {p.instance: p.entries for p in n.fabric_ports}} if n.fabric_ports else {}),
    }
