"""``gpufabric inventory import FILE``: YAML/JSON inventory files, and the formats the fabric
kinds add (``FabricKind.import_formats``: real discovery output, e.g. ibnetdiscover's; listed by
:mod:`gpufabric.cli.import_formats`). No kind is named here but in help text."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpufabric.cli import import_formats as formats
from gpufabric.cli import ironic_source as ironic
from gpufabric.cli.common import JSON_OPT, fabrics_yaml
from gpufabric.cli.decl import Argument, Group, Option
from gpufabric.cli.output import console, emit_json, escape
from gpufabric.domain.errors import ValidationError

if TYPE_CHECKING:
    from gpufabric.store.registry import Registry

app = Group(no_args_is_help=True)
FORMATS = f"<{'|'.join(formats.NAMES)}>"
FORMAT_HELP = f"{formats.listed()} (default: by file suffix)."


@app.command("import")
def import_(
    file: Path | None = Argument(None, exists=False),
    fmt: str | None = Option(None, "--format", parser=formats.parse, metavar=FORMATS, help=FORMAT_HELP),
    strict: bool = Option(
        False, "--strict", help="ibnetdiscover: refuse the whole file if one CA does not match a host."
    ),
    subnet: str | None = Option(
        None, "--fabric", help="ibnetdiscover: the IB fabric instance (subnet) of fabrics.yaml the HCAs are on "
        "(default: the only one); the nodes' ports on other instances are kept."
    ),
    confirm: list[str] = Option(
        [], "--confirm", metavar="PORT_GUID=NODE", help="ibnetdiscover: apply a change the import holds, as it lists "
        "it (repeatable; 'all': every change it holds); a node description is only a claim."
    ),
    json_out: bool = JSON_OPT,
    source: str | None = Option(None, "--from", metavar="ironic", help=ironic.FROM_HELP),
    ironic_url: str | None = Option(None, "--ironic-url", help=ironic.URL_HELP),
    ironic_token_file: Path | None = Option(None, "--ironic-token-file", help=ironic.TOKEN_HELP),
    ironic_ca: Path | None = Option(None, "--ironic-ca", help=ironic.CA_HELP),
    ironic_insecure: bool = Option(False, "--ironic-insecure", help=ironic.INSECURE_HELP),
    node_map: Path | None = Option(None, "--node-map", help=ironic.NODE_MAP_HELP),
) -> None:
    """Register nodes and ports. ibnetdiscover output (its default format: `-p` output has no CA
    node GUIDs and is refused) adds IB ports to nodes matched by node description "HOSTNAME DEVICE"
    ("gpu-a01 mlx5_0", "gpu-a01 HCA-1"; host names case-insensitive). Switches, SHARP aggregation
    nodes and CAs without a host description are skipped and reported (--json: every node);
    --strict refuses the whole file instead. --from ironic reads Ironic's nodes, ports and port
    groups (its API, or FILE: a recorded listing) into Ethernet NICs and bonds (docs/openstack.md)."""
    if source is not None or file is None:  # Ironic's listings, read by the core's format (cli/ironic_source.py)
        ironic.import_from(source, file, ironic.Access(ironic_url, ironic_token_file, ironic_ca, ironic_insecure),
                           (subnet, strict, tuple(confirm)), node_map, lambda doc, f, where: _kind_import_done(doc, f, where, json_out))  # fmt: skip
        return
    if not file.is_file():
        raise ValidationError("file", str(file), "an existing, readable file")
    if node_map is not None:
        raise ValidationError("--node-map", str(node_map), "only with --from ironic")
    from gpufabric.cli.backends.choose import backend
    from gpufabric.workflow.inventory import load_inventory, port_namings

    name, kind_format = formats.resolve(file, fmt)
    b = backend()
    where = " through the API" if b.remote else ""
    if kind_format is not None:  # read against fabrics.yaml and the store of whoever answers (here or the server)
        doc = b.import_format(name, kind_format, file.read_text(errors="replace"), subnet, strict, tuple(confirm))
        _kind_import_done(doc, file, where, json_out)
        return
    kinds = formats.listed(formats.NAMES[len(formats.FILES) :] or ("a fabric kind's format",))
    if subnet is not None:
        raise ValidationError("--fabric", subnet, f"only with --format {kinds} (a YAML/JSON port names its instance)")
    if confirm:
        raise ValidationError("--confirm", confirm[0], f"only with --format {kinds} (a YAML/JSON import holds nothing)")
    fabrics = fabrics_yaml()
    registry = _registry(fabrics)
    instances = _instances(fabrics, registry)
    namings = port_namings(fabrics, registry.ordered_kinds() if registry is not None else ())
    inv = load_inventory(file, name, namings, instances)  # parsed and checked here (and again by a server)
    res = b.import_inventory(inv, instances)
    if json_out:
        emit_json({"format": name, "nodes": len(inv.nodes), "result": res})
    else:
        console.print(f"imported {len(inv.nodes)} nodes from {escape(str(file))} ({name}){where}: {escape(import_line(res))}")


def _kind_import_done(doc: dict[str, Any], file: Path, where: str, json_out: bool) -> None:
    """A kind format's import answer (``workflow.kind_import.document``), on the store or through the API."""
    if json_out:
        emit_json(doc)
        return
    for line in doc["messages"]:
        console.print(escape(line))
    console.print(f"imported {doc['nodes']} nodes from {escape(str(file))} ({doc['format']}){where}: "
                  f"{escape(import_line(doc['result']))}")  # fmt: skip
    for h, why in doc["held"].items():
        console.print(f"{escape(h)} {escape(why)}")


def import_line(res: Any) -> str:
    """The API's import answer ``{added, updated, unchanged}`` as a person reads it (never a dict repr)."""
    if not isinstance(res, dict):
        return str(res)
    return f"{res.get('added', 0)} added, {res.get('updated', 0)} updated, {res.get('unchanged', 0)} unchanged"


def _registry(fabrics: dict[str, Any]) -> Registry | None:
    """The registered kinds (no driver imported), when there is a fabrics.yaml to read with them."""
    from gpufabric.store.registry import Registry

    return Registry.from_entry_points(drivers=False) if fabrics else None


def _instances(fabrics: dict[str, Any], registry: Registry | None) -> dict[str, Any]:
    """instance -> bound kind of every fabric instance of fabrics.yaml (their inventory sections)."""
    from gpufabric.engine.fabrics import configured_instances

    return configured_instances(fabrics, registry) if registry is not None else {}
