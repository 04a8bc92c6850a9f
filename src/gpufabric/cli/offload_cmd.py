"""``gpufabric offload``: which DPU flows run in NIC hardware, tc software or the datapath,
per tenant and node, with alerts; the SR-IOV node policy a DPU host needs; each DPU's mode and
firmware (``facts``); the tolerations infra DaemonSets need on DPU hosts (``tolerations``).

``report`` reads every DPU configured in fabrics.yaml (``dpu.offload``; the default), a directory
of recorded outputs (``--from``, layout in docs/dpu.md) or the live OVN lab (``--ovn-lab ROOT``); ``--prometheus`` prints the
metrics text instead of tables."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
import yaml

from gpufabric.cli.output import console, emit_json, table
from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.models import QUARANTINE
from gpufabric.fabrics.dpu.collect import load_recorded, read_node_offload
from gpufabric.fabrics.dpu.info import node_dpu
from gpufabric.fabrics.dpu.model import LogicalPort
from gpufabric.fabrics.dpu.ovn import OvnNbDriver
from gpufabric.fabrics.dpu.ovs import DpuOvsDriver
from gpufabric.fabrics.dpu.profiles import TENANT_KEY
from gpufabric.fabrics.dpu.report import NodeOffload, metrics_text, offload_report
from gpufabric.fabrics.dpu.sriov import sriov_policy
from gpufabric.lab.ovn import OvnLab
from gpufabric.workflow.inventory import load_inventory

app = typer.Typer(no_args_is_help=True, add_completion=False)


def _capacity(items: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        model, _, n = item.rpartition("=")
        if not model or not n.isdigit() or int(n) < 1:
            raise ValidationError("--capacity", item, "NIC_MODEL=ENTRIES, e.g. BlueField-2=1000000")
        out[model] = int(n)
    return out


def _live(root: Path) -> tuple[list[NodeOffload], dict[str, LogicalPort], dict[str, str]]:
    lab = OvnLab(root)
    st = lab.status()
    nodes, owners = [], {}
    for node, d in st["dpus"].items():
        nodes.append(read_node_offload(node, d["ovsdb"], d["appctl"], d["netns"]))
        binding = {s.key: s.value for s in DpuOvsDriver(node, d["ovsdb"]).read()}
        owners[node] = binding.get(TENANT_KEY, QUARANTINE)
    lsps = {p.name: p for p in OvnNbDriver(st["central"]["nb"]).read()}
    return nodes, lsps, owners


def _configured(capacity: dict[str, int], warn_at: float) -> dict[str, Any]:
    """Every DPU of fabrics.yaml (``dpu.offload``), owners from the store."""
    from gpufabric.cli.common import open_engine
    from gpufabric.fabrics.dpu.site import site_report

    engine = open_engine()
    try:
        b = engine.fabrics.backends.get("dpu")
        if b is None:
            raise ConfigError("fabrics.dpu", None, "a dpu section in fabrics.yaml (or --from DIR / --ovn-lab DIR)")
        return site_report(b, engine.tenancy(), capacity, warn_at)
    finally:
        engine.fabrics.close()


@app.command("report")
def report(
    source: Path = typer.Option(None, "--from", help="Directory of recorded outputs (see docs/dpu.md)."),
    ovn_lab: Path = typer.Option(None, "--ovn-lab", help="Read the live OVN lab under this directory."),
    capacity: list[str] = typer.Option([], "--capacity", help="Offload table size per NIC model: MODEL=N."),
    warn_at: float = typer.Option(0.8, "--warn-at", help="Warn when a table is this full (0-1]."),
    prometheus: bool = typer.Option(False, "--prometheus", help="Print Prometheus metrics text."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Per tenant and node: flows and bytes in hw / tc software / datapath, and alerts (default:
    every DPU of fabrics.yaml)."""
    if source is not None and ovn_lab is not None:
        raise ValidationError("offload report", "", "at most one of --from DIR or --ovn-lab DIR (neither: fabrics.yaml)")
    rep: dict[str, Any]
    if source is None and ovn_lab is None:
        rep = _configured(_capacity(capacity), warn_at)
    else:
        nodes, lsps, owners = load_recorded(source) if source is not None else _live(ovn_lab)
        rep = offload_report(nodes, lsps, owners, _capacity(capacity), warn_at)
    if json_out:
        emit_json(rep)
        return
    if prometheus:
        sys.stdout.write(metrics_text(rep))
        return
    table("Offload by tenant", ["node", "tenant", "hw flows", "hw bytes", "tc flows", "tc bytes", "dp flows", "dp bytes"],
          [(r["node"], r["tenant"], r["hw_flows"], r["hw_bytes"], r["tc_flows"], r["tc_bytes"], r["datapath_flows"],
            r["datapath_bytes"]) for r in rep["rows"]])
    table("Offload tables", ["node", "NIC model", "used", "capacity", "full"],
          [(t["node"], t["nic_model"], t["used"], "unknown" if t["capacity"] is None else t["capacity"],
            "-" if t["ratio"] is None else f"{t['ratio']:.1%}") for t in rep["tables"]])
    for a in rep["alerts"]:
        console.print(f"[bold]{a['severity']}[/] {a['kind']}: {a['message']}", highlight=False)
    if not rep["alerts"]:
        console.print("no alerts")


@app.command("sriov-policy")
def sriov(
    node: str = typer.Argument(..., help="The host node (with a DPU in the inventory)."),
    inventory: Path = typer.Option(..., "--inventory", "-i", help="Inventory file (YAML or JSON)."),
    resource: str = typer.Option("dpu_vfs", "--resource", help="SR-IOV resource name."),
    json_out: bool = typer.Option(False, "--json", help="JSON instead of YAML."),
) -> None:
    """The SriovNetworkNodePolicy for NODE's DPU (switchdev, netdevice, VF 0 excluded)."""
    inv = load_inventory(inventory)
    n = inv.node(node)
    info = node_dpu(n) if n is not None else None
    if info is None:
        raise ValidationError("node", node, "a node with a DPU in the inventory")
    policy = sriov_policy(info, resource)
    if json_out:
        emit_json(policy)
    else:
        sys.stdout.write(yaml.safe_dump(policy, sort_keys=False))


@app.command("facts")
def facts(
    nodes: list[str] = typer.Argument(None, metavar="[NODE...]", help="Host nodes (default: every node with a DPU)."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Each DPU's mode (running and after the next power cycle), firmware and pending changes,
    read now through dpu.mst."""
    from gpufabric.cli.dpu_facts import read_facts

    got = read_facts(list(nodes or []))
    if json_out:
        emit_json({"dpus": [f.to_dict() for f in got]})
        return
    table("DPU mode and firmware", ["node", "type", "mode", "next boot", "firmware", "power cycle", "error"],
          [(f.host, f.device_type, f.mode, f.next_mode, f.firmware, "pending" if f.power_cycle_pending else "-",
            f.error) for f in got])  # fmt: skip


@app.command("tolerations")
def tolerations(
    json_out: bool = typer.Option(False, "--json", help="JSON instead of YAML."),
) -> None:
    """The tolerations an infra DaemonSet needs to run on DPU hosts (the dpu-host taint keeps
    every other pod off them): paste under spec.template.spec.tolerations."""
    from gpufabric.fabrics.dpu.lifecycle import tolerations as tol

    if json_out:
        emit_json({"tolerations": tol()})
    else:
        sys.stdout.write(yaml.safe_dump({"tolerations": tol()}, sort_keys=False))
