"""Reading a DPU's offload state for the offload report (I/O; parsing is in :mod:`...readers.offload`).

``read_node_offload`` runs ``ovs-appctl dpctl/dump-flows -m`` against the DPU's
``ovs-vswitchd``, lists its ``Interface`` rows (``external_ids:iface-id``), reads the OVS tenant
binding, and runs ``tc -j -s filter show dev <rep> ingress`` on each bound representor (inside
the DPU's network namespace when given). ``load_recorded`` reads the same facts from a directory
of recorded outputs::

    DIR/<node>/dump-flows.txt      DIR/<node>/tc/<dev>.json
    DIR/<node>/ifaces.json  {"<ovs port>": "<logical port>"}
    DIR/meta.json           {"owners": {"<node>": "<tenant>"}, "nic_models": {"<node>": "..."},
                             "logical_ports": [{"name", "tenant", "node", "mac", "slot"}]}
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gpufabric.domain.errors import FabricError, ValidationError
from gpufabric.fabrics.dpu.audit.report import NodeOffload
from gpufabric.fabrics.dpu.readers.dbjson import parse_list_json
from gpufabric.fabrics.dpu.readers.offload import parse_dump_flows, parse_tc_filters
from gpufabric.fabrics.dpu.state import LogicalPort


def _run(args: Sequence[str], timeout: float = 10.0) -> str:
    try:
        r = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise FabricError(f"{args[0]}: {e}", fabric="dpu") from None
    if r.returncode != 0:
        raise FabricError(f"{' '.join(args[:3])} failed: {r.stderr.strip()[:300]}", fabric="dpu")
    return r.stdout


def read_iface_ids(ovsdb: str) -> dict[str, str]:
    rows = parse_list_json(_run(["ovs-vsctl", f"--db={ovsdb}", "--format=json", "--columns=name,external_ids", "list", "Interface"]))
    return {r["name"]: (r.get("external_ids") or {})["iface-id"] for r in rows if "iface-id" in (r.get("external_ids") or {})}


def read_node_offload(
    node: str, ovsdb: str, appctl: str, netns: str = "", nic_model: str = "generic",
    run: Callable[[Sequence[str]], str] | None = None,
) -> NodeOffload:  # fmt: skip
    """``run``: where ``ovs-appctl`` and ``tc`` run (None: here; an :class:`~.sshrun.SshRunner`'s
    ``run``: on the DPU's Arm side); the Interface rows come from the OVSDB remote either way."""
    run = run or _run
    flows = parse_dump_flows(run(["ovs-appctl", "-t", appctl, "dpctl/dump-flows", "-m"]))
    ifaces = read_iface_ids(ovsdb)
    filters = []
    for dev in sorted(ifaces):
        cmd = ["tc", "-j", "-s", "filter", "show", "dev", dev, "ingress"]
        filters += parse_tc_filters(run(["ip", "netns", "exec", netns, *cmd] if netns else cmd), dev)
    return NodeOffload(node, nic_model, tuple(flows), tuple(filters), ifaces)


def load_recorded(root: Path) -> tuple[list[NodeOffload], dict[str, LogicalPort], dict[str, str]]:
    """(nodes, logical ports by name, owners) from a directory of recorded outputs."""
    try:
        meta: dict[str, Any] = json.loads((root / "meta.json").read_text())
    except (OSError, ValueError) as e:
        raise ValidationError("offload --from", str(root), "a directory with meta.json (see docs/dpu.md)", str(e)) from None
    nodes = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        flows_file = d / "dump-flows.txt"
        flows = parse_dump_flows(flows_file.read_text()) if flows_file.exists() else []
        filters = [f for t in sorted((d / "tc").glob("*.json")) for f in parse_tc_filters(t.read_text(), t.stem)]
        ifaces = json.loads((d / "ifaces.json").read_text()) if (d / "ifaces.json").exists() else {}
        nodes.append(NodeOffload(d.name, meta.get("nic_models", {}).get(d.name, "generic"), tuple(flows), tuple(filters), ifaces))
    lsps = {p["name"]: LogicalPort(p["name"], p["tenant"], p.get("node", ""), p.get("mac", ""), slot=p.get("slot", ""))
            for p in meta.get("logical_ports", [])}  # fmt: skip
    return nodes, lsps, dict(meta.get("owners", {}))
