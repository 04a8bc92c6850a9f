"""``gpufabric node list|show|move|owner``: the inventory as the store holds it, locally or
through the API (``--api``)."""

from __future__ import annotations

from typing import Any

from gpufabric.cli.backends.choose import backend
from gpufabric.cli.common import JSON_OPT
from gpufabric.cli.decl import Argument, Group, Option
from gpufabric.cli.output import console, emit_json, escape, node_table, table
from gpufabric.domain.topology import path_text

app = Group(no_args_is_help=True)


@app.command("list")
def list_nodes(
    tenant: str = Option(None, "--tenant", help="Only nodes held by this tenant (or quarantine)."),
    state: str = Option(None, "--state"),
    wide: bool = Option(False, "--wide", help="Every port of every fabric in full (and the offering)."),
    json_out: bool = JSON_OPT,
) -> None:
    """List nodes with their tenant, state and one column per fabric (``--wide``: every port)."""
    nodes = backend().nodes(tenant, state)
    if json_out:
        emit_json(nodes)
        return
    node_table(nodes, wide)


@app.command("show")
def show(name: str, json_out: bool = JSON_OPT) -> None:
    """Show one node with every port on every fabric."""
    n = backend().node(name)
    if json_out:
        emit_json(n)
        return
    console.print(
        f"[bold]{n['name']}[/]  tenant={n['tenant']}  offering={n['offering'] or '-'}  state={n['state']}"
        f"  owner={n['owner'] or '-'}",
        highlight=False,
    )
    if n.get("host"):  # a slot of a shared host (issue 33)
        console.print(f"slot of {n['host']}: GPU modules {','.join(map(str, n.get('slot_modules') or []))}", highlight=False)
    if n.get("slots"):
        rows = [(s["name"], ",".join(map(str, s["modules"])), s["tenant"]) for s in n["slots"]]
        table("Slots", ["slot", "GPU modules", "tenant"], rows)
    for kind, ports in (n.get("ports") or {}).items():  # every port, as each kind lists them
        cols = list(dict.fromkeys(k for q in ports for k in q))
        table(kind, cols, [tuple(_cell(q, c) for c in cols) for q in ports])
    cells = [(name, view["summary"]) for name, view in (n.get("fabrics") or {}).items() if view.get("summary")]
    if cells:  # every fabric's own summary (the node table's cells), e.g. a DPU and its role
        table("Fabrics", ["fabric", "summary"], cells)


def _cell(port: dict[str, Any], col: str) -> str:
    """One cell of a port row: a ``path`` (domain.topology) as ``leaf -> spine|spine``."""
    v = port.get(col)
    if v in (None, "", []):
        return "-"
    return path_text(v) if col == "path" else str(v)


@app.command("owner")
def owner(
    name: str,
    tenant: str = Option(None, "--tenant", help="The owning tenant (may lease the node out); omit to clear."),
    json_out: bool = JSON_OPT,
) -> None:
    """Set which tenant owns a node (ESI owner)."""
    b = backend()
    b.set_owner(name, tenant)
    n = b.node(name)
    emit_json(n) if json_out else console.print(f"node {name} owner: {n['owner'] or '-'}", highlight=False)


@app.command("move")
def move(
    names: list[str] = Argument(..., metavar="NODE...", help="One or more nodes (requested together: one batch)."),
    to_tenant: str = Option(..., "--to-tenant", help="Target tenant, or 'quarantine' to release the node."),
    network: list[str] = Option([], "--network", help="Networks to join (default: all of the tenant's)."),
    offering: str = Option("baremetal", "--offering", help="openstack, openshift, baremetal or your own."),
    dry_run: bool = Option(False, "--dry-run", help="Print the plan of each phase; change nothing."),
    window: float = Option(0.0, "--window", help="Seconds to wait so concurrent requests share one batch."),
    gpus: int = Option(None, "--gpus", help="GPUs of the node the tenant gets (an NVLink partition; default all)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Move nodes to another tenant: old tenant -> quarantine -> new tenant, verified on every fabric.
    Several nodes are requested in one transaction (all or none) and run as one batch."""
    # --gpus: the NVLink kind's lease term, a declared exception (see cli/lease_cmd.py)
    from gpufabric.cli.move_cmd import move_nodes
    from gpufabric.domain.lease_terms import terms_of

    move_nodes(names, to_tenant, network, offering, dry_run, json_out, window, terms_of({"gpus": gpus}))


@app.command("power-cycled")
def power_cycled(name: str, json_out: bool = JSON_OPT) -> None:
    """Say NODE's host and DPU were power-cycled (cold): re-reads its DPU's mode and firmware, so a
    move into an offload offering waiting on it can proceed; refused while a change is still pending."""
    from gpufabric.cli.power_cycle import document
    from gpufabric.cli.power_cycle import power_cycled as react

    answers = react(name)
    if json_out:
        emit_json(document(answers))
        return
    for _, a in answers:
        console.print(f"node {name}: {escape(a.line)}", highlight=False)
