"""``gpufabric offload``, the DPU kind's own command group (contributed through
:meth:`DpuKind.cli_group`; output, fabrics, inventory and lab come from the CLI's
:class:`~gpufabric.domain.views.CliHost`): which DPU flows run in NIC hardware, tc software or
the datapath, per tenant and node, with alerts; the SR-IOV node policy a DPU host needs; each
DPU's mode and firmware (``facts``); the tolerations infra DaemonSets need on DPU hosts
(``tolerations``).

``report`` reads every DPU configured in fabrics.yaml (``dpu.offload``; the default), a directory
of recorded outputs (``--from``, layout in docs/dpu.md) or the live OVN lab (``--ovn-lab ROOT``);
``--prometheus`` prints the metrics text instead of tables."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
import yaml

from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.models import QUARANTINE
from gpufabric.domain.views import CliHost
from gpufabric.fabrics.dpu.audit.report import NodeOffload, metrics_text, offload_report
from gpufabric.fabrics.dpu.backend.facts import facts_of
from gpufabric.fabrics.dpu.backend.lifecycle import tolerations as tol
from gpufabric.fabrics.dpu.drivers.host.collect import load_recorded, read_node_offload
from gpufabric.fabrics.dpu.drivers.host.ovs import DpuOvsDriver
from gpufabric.fabrics.dpu.drivers.ovn.northbound import OvnNbDriver
from gpufabric.fabrics.dpu.entries.info import node_dpu
from gpufabric.fabrics.dpu.plan.profiles import TENANT_KEY
from gpufabric.fabrics.dpu.plan.sriov import sriov_policy
from gpufabric.fabrics.dpu.readers.dpumode import DpuFacts
from gpufabric.fabrics.dpu.state import LogicalPort

FABRIC = "dpu"  # the instance the commands read (the default instance of the kind)


def _firmware_cell(f: DpuFacts) -> str:
    """The firmware the DPU runs, and the image burned but not yet running when they differ."""
    if f.flashed_firmware and f.flashed_firmware != f.firmware:
        return f"{f.firmware} (flashed {f.flashed_firmware})"
    return f.firmware


def _capacity(items: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        model, _, n = item.rpartition("=")
        if not model or not n.isdigit() or int(n) < 1:
            raise ValidationError("--capacity", item, "NIC_MODEL=ENTRIES, e.g. BlueField-2=1000000")
        out[model] = int(n)
    return out


def _live(host: CliHost, root: Path) -> tuple[list[NodeOffload], dict[str, LogicalPort], dict[str, str]]:
    st = host.lab_status("ovn", root)
    nodes, owners = [], {}
    for node, d in st["dpus"].items():
        nodes.append(read_node_offload(node, d["ovsdb"], d["appctl"], d["netns"]))
        binding = {s.key: s.value for s in DpuOvsDriver(node, d["ovsdb"]).read()}
        owners[node] = binding.get(TENANT_KEY, QUARANTINE)
    lsps = {p.name: p for p in OvnNbDriver(st["central"]["nb"]).read()}
    return nodes, lsps, owners


def _configured(host: CliHost, capacity: dict[str, int], warn_at: float) -> dict[str, Any]:
    """Every DPU of fabrics.yaml (``dpu.offload``), owners from the store."""
    from gpufabric.fabrics.dpu.backend.offload import site_report  # its SSH stack: only for the configured DPUs

    with host.fabrics() as f:
        b = f.backend(FABRIC)
        if b is None:
            raise ConfigError("fabrics.dpu", None, "a dpu section in fabrics.yaml (or --from DIR / --ovn-lab DIR)")
        return site_report(b, f.tenancy(), capacity, warn_at)


def build(host: CliHost) -> typer.Typer:
    """The ``offload`` typer app over ``host``."""
    app = typer.Typer(no_args_is_help=True, add_completion=False)

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
            rep = _configured(host, _capacity(capacity), warn_at)
        else:
            nodes, lsps, owners = load_recorded(source) if source is not None else _live(host, ovn_lab)
            rep = offload_report(nodes, lsps, owners, _capacity(capacity), warn_at)
        if json_out:
            host.emit_json(rep)
            return
        if prometheus:
            sys.stdout.write(metrics_text(rep))
            return
        host.table("Offload by tenant", ["node", "slot", "tenant", "hw flows", "hw bytes", "tc flows", "tc bytes", "dp flows",
                   "dp bytes"], [(r["node"], r.get("slot") or "-", r["tenant"], r["hw_flows"], r["hw_bytes"], r["tc_flows"], r["tc_bytes"],
                                  r["datapath_flows"], r["datapath_bytes"]) for r in rep["rows"]])  # fmt: skip
        host.table("Offload tables", ["node", "NIC model", "used", "capacity", "full"],
                   [(t["node"], t["nic_model"], t["used"], "unknown" if t["capacity"] is None else t["capacity"],
                     "-" if t["ratio"] is None else f"{t['ratio']:.1%}") for t in rep["tables"]])  # fmt: skip
        for a in rep["alerts"]:
            host.echo(f"[bold]{a['severity']}[/] {a['kind']}: {a['message']}")
        if not rep["alerts"]:
            host.echo("no alerts")

    @app.command("sriov-policy")
    def sriov(
        node: str = typer.Argument(..., help="The host node (with a DPU in the inventory)."),
        inventory: Path = typer.Option(..., "--inventory", "-i", help="Inventory file (YAML or JSON)."),
        resource: str = typer.Option("dpu_vfs", "--resource", help="SR-IOV resource name."),
        json_out: bool = typer.Option(False, "--json", help="JSON instead of YAML."),
    ) -> None:
        """The SriovNetworkNodePolicy for NODE's DPU (switchdev, netdevice, VF 0 excluded)."""
        n = host.inventory(inventory).node(node)
        info = node_dpu(n) if n is not None else None
        if info is None:
            raise ValidationError("node", node, "a node with a DPU in the inventory")
        policy = sriov_policy(info, resource)
        if json_out:
            host.emit_json(policy)
        else:
            sys.stdout.write(yaml.safe_dump(policy, sort_keys=False))

    @app.command("facts")
    def facts(
        nodes: list[str] = typer.Argument(None, metavar="[NODE...]", help="Host nodes (default: every node with a DPU)."),
        json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
    ) -> None:
        """Each DPU's mode (running and after the next power cycle), firmware and pending changes,
        read now through dpu.mst."""
        with host.fabrics() as f:
            got = facts_of(f.backend(FABRIC), f.tenancy().nodes, list(nodes or []))
        if json_out:
            host.emit_json({"dpus": [x.to_dict() for x in got]})
            return
        host.table("DPU mode and firmware", ["node", "type", "mode", "next boot", "firmware", "power cycle", "error"],
                   [(x.host, x.device_type, x.mode, x.next_mode, _firmware_cell(x), "pending" if x.power_cycle_pending else "-",
                     x.error) for x in got])  # fmt: skip

    @app.command("tolerations")
    def tolerations(
        json_out: bool = typer.Option(False, "--json", help="JSON instead of YAML."),
    ) -> None:
        """The tolerations an infra DaemonSet needs to run on DPU hosts (the dpu-host taint keeps
        every other pod off them): paste under spec.template.spec.tolerations."""
        if json_out:
            host.emit_json({"tolerations": tol()})
        else:
            sys.stdout.write(yaml.safe_dump({"tolerations": tol()}, sort_keys=False))

    return app
