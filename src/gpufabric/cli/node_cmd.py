"""``gpufabric node list|show``: the inventory as the store holds it."""

from __future__ import annotations

import typer

from gpufabric.cli.common import JSON_OPT, open_store
from gpufabric.cli.output import console, emit_json, jsonable, table

app = typer.Typer(no_args_is_help=True)


@app.command("list")
def list_nodes(json_out: bool = JSON_OPT) -> None:
    """List nodes with their state, Ethernet ports and IB port GUIDs."""
    nodes = open_store().nodes()
    if json_out:
        emit_json(jsonable(nodes))
        return
    table(
        f"{len(nodes)} nodes",
        ["node", "offering", "state", "ethernet (switch/port)", "IB port GUIDs"],
        [
            (
                n.name,
                n.offering or "-",
                n.state.value,
                "\n".join(f"{p.switch}/{p.switch_port}" for p in n.ethernet) or "-",
                "\n".join(f"{p.device}/{p.port_num} {p.port_guid}" for p in n.ib) or "-",
            )
            for n in nodes
        ],
    )


@app.command("show")
def show(name: str, json_out: bool = JSON_OPT) -> None:
    """Show one node with every port on every fabric."""
    n = open_store().node(name)
    if json_out:
        emit_json(jsonable(n))
        return
    console.print(f"[bold]{n.name}[/]  offering={n.offering or '-'}  state={n.state.value}")
    table("Ethernet", ["nic", "switch", "port", "mac"], [(p.name, p.switch, p.switch_port, p.mac) for p in n.ethernet])
    table(
        "InfiniBand",
        ["device", "port", "port GUID", "node GUID", "switch GUID", "switch port"],
        [(p.device, p.port_num, p.port_guid, p.node_guid, p.switch_guid or "-", p.switch_port or "-") for p in n.ib],
    )
    if n.gpus:
        table("GPUs", ["module id", "PCI bus id"], [(g.module_id, g.pci_bus_id) for g in n.gpus])
    if n.dpus:
        table("DPUs", ["name", "mode"], [(d.name, d.mode.value) for d in n.dpus])


@app.command("move")
def move(
    name: str,
    to_tenant: str = typer.Option(..., "--to-tenant", help="Target tenant, or 'quarantine' to release the node."),
    network: list[str] = typer.Option([], "--network", help="Networks to join (default: all of the tenant's)."),
    offering: str = typer.Option("baremetal", "--offering", help="openstack, openshift, baremetal or your own."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan of each phase; change nothing."),
    window: float = typer.Option(0.0, "--window", help="Seconds to wait so concurrent requests share one batch."),
    gpus: int = typer.Option(None, "--gpus", help="GPUs of the node the tenant gets (an NVLink partition; default all)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Move a node to another tenant: old tenant -> quarantine -> new tenant, verified on every fabric."""
    from gpufabric.cli.move_cmd import move_node

    move_node(name, to_tenant, network, offering, dry_run, json_out, window, gpus)
