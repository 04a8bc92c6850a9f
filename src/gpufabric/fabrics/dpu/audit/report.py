"""The offload report (pure): datapath flows and tc filters of each DPU joined to tenants
through OVS ports (``external_ids:iface-id``) and OVN logical ports. On a shared host (issue 33) a
flow whose logical port is a slot's (``LogicalPort.slot``) is counted for that slot: its row has
``slot`` set (None: the host's own) and it is judged against the slot's owner, not the host's.

Prometheus metrics (:func:`metrics_text`), all gauges:

* ``gpufabric_dpu_offload_flows{node,tenant,path}``  flows per path ``hw``/``tc``/``datapath``
  (a slot's row also carries ``slot``: ``{node,slot,tenant,path}``, on the bytes too)
* ``gpufabric_dpu_offload_bytes{node,tenant,path}``  bytes of those flows
* ``gpufabric_dpu_offload_table_used{node,nic_model}`` entries in the NIC's offload table
* ``gpufabric_dpu_offload_table_capacity{node,nic_model}`` stated capacity (only where known,
  see :mod:`.capacity`: no figure is built in, an unknown model has no capacity series)
* ``gpufabric_dpu_offload_alerts{node,kind}``        open alerts per kind
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.models import QUARANTINE
from gpufabric.fabrics.dpu.audit.capacity import Capacity, merged
from gpufabric.fabrics.dpu.readers.offload import PATHS, DpFlow, TcFilter
from gpufabric.fabrics.dpu.state import LogicalPort

UNATTRIBUTED = "-"


@dataclass(frozen=True)
class NodeOffload:
    """What was read on one DPU: its flows, its representors' tc filters, and which logical
    port each OVS port is bound to (``iface-id``)."""

    node: str
    nic_model: str = "generic"
    flows: tuple[DpFlow, ...] = ()
    filters: tuple[TcFilter, ...] = ()
    iface_ids: Mapping[str, str] = field(default_factory=dict)


def flow_port(flow: DpFlow, node: NodeOffload, lsps: Mapping[str, LogicalPort]) -> LogicalPort | None:
    """The logical port of a flow: its input port's, else its first output's (None: neither)."""
    for port in (flow.in_port, *flow.out_ports):
        lsp = lsps.get(node.iface_ids.get(port, ""))
        if lsp is not None:
            return lsp
    return None


def flow_tenant(flow: DpFlow, node: NodeOffload, lsps: Mapping[str, LogicalPort]) -> str:
    """The tenant of a flow: its logical port's (:func:`flow_port`), else ``-``."""
    lsp = flow_port(flow, node, lsps)
    return lsp.tenant if lsp is not None else UNATTRIBUTED


def flow_unit(flow: DpFlow, node: NodeOffload, lsps: Mapping[str, LogicalPort]) -> tuple[str, str]:
    """(the node a flow is counted for, its tenant): its logical port's slot, else the DPU's host."""
    lsp = flow_port(flow, node, lsps)
    return (lsp.slot or node.node, lsp.tenant) if lsp is not None else (node.node, UNATTRIBUTED)


def offload_report(
    nodes: list[NodeOffload],
    lsps: Mapping[str, LogicalPort],
    owners: Mapping[str, str],
    capacity: Mapping[str, int | Capacity] | None = None,
    warn_at: float = 0.8,
) -> dict[str, Any]:
    """Per tenant and node: flows and bytes in hardware / tc software / datapath; alerts for
    ``skip_sw``+``not_in_hw`` filters, for tenant flows on a node that is quarantined or owned
    by another tenant, and for offload-table occupancy at ``warn_at`` (warning) or full
    (critical) of the NIC model's capacity where it is known (``capacity``: model -> figure
    with its source; unknown models get ``capacity: null``, no ratio and no alert).
    ``owners``: node -> tenant or ``quarantine`` (slots included: a slot's flows are its own)."""
    if not 0 < warn_at <= 1:
        raise ValidationError("offload.warn_at", warn_at, "a fraction in (0, 1]")
    caps = merged({}, capacity)
    rows: dict[tuple[str, str, str], dict[str, int]] = {}
    alerts: list[dict[str, Any]] = []
    tables: list[dict[str, Any]] = []
    for n in sorted(nodes, key=lambda x: x.node):
        foreign: dict[tuple[str, str], int] = {}
        for f in n.flows:
            unit, t = flow_unit(f, n, lsps)
            slot = "" if unit == n.node else unit
            row = rows.setdefault((n.node, slot, t), {f"{p}_{k}": 0 for p in PATHS for k in ("flows", "bytes")})
            row[f"{f.path}_flows"] += 1
            row[f"{f.path}_bytes"] += f.bytes
            if t != UNATTRIBUTED and t != owners.get(unit, QUARANTINE):
                foreign[(slot, t)] = foreign.get((slot, t), 0) + 1
        for (slot, t), count in sorted(foreign.items()):
            owner = owners.get(slot or n.node, QUARANTINE)
            kind = "quarantined_node_flows" if owner == QUARANTINE else "other_tenant_flows"
            where = f"{n.node} slot {slot}" if slot else n.node
            alerts.append(
                {"kind": kind, "severity": "critical", "node": n.node, "tenant": t, "flows": count,
                 **({"slot": slot} if slot else {}),
                 "message": f"{where}: {count} flow(s) of tenant {t!r} on a {'slot' if slot else 'node'} owned by {owner!r}"}
            )
        for tf in n.filters:
            if tf.silent_drop:
                alerts.append(
                    {"kind": "skip_sw_not_in_hw", "severity": "high", "node": n.node, "dev": tf.dev,
                     "pref": tf.pref, "handle": tf.handle,
                     "message": f"{n.node} {tf.dev} pref {tf.pref}: skip_sw rule not in hardware (does nothing)"}
            )
        used = max(sum(1 for f in n.flows if f.path == "hw"), sum(tf.in_hw_count or 1 for tf in n.filters if tf.in_hw))
        known = caps.get(n.nic_model)
        if known is None:
            tables.append({"node": n.node, "nic_model": n.nic_model, "used": used, "capacity": None,
                           "capacity_source": None, "ratio": None})
            continue
        cap = known.entries
        ratio = used / cap
        tables.append({"node": n.node, "nic_model": n.nic_model, "used": used, "capacity": cap,
                       "capacity_source": known.source, "ratio": round(ratio, 4)})
        if ratio >= warn_at:
            level = "critical" if ratio >= 1 else "warning"
            alerts.append(
                {"kind": "offload_table", "severity": level, "node": n.node, "used": used, "capacity": cap,
                 "message": f"{n.node} ({n.nic_model}): offload table {used}/{cap} ({ratio:.0%}; capacity from {known.source})"}
            )
    return {
        "rows": [{"node": k[0], "slot": k[1] or None, "tenant": k[2], **v} for k, v in sorted(rows.items())],
        "tables": tables,
        "alerts": alerts,
    }


def _labels(**kv: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in kv.items()) + "}"


def metrics_text(report: Mapping[str, Any]) -> str:
    """The report in Prometheus text exposition format (names in the module docstring)."""
    out = ["# TYPE gpufabric_dpu_offload_flows gauge", "# TYPE gpufabric_dpu_offload_bytes gauge"]
    for r in report["rows"]:
        for p in PATHS:
            slot = {"slot": r["slot"]} if r.get("slot") else {}
            lab = _labels(node=r["node"], **slot, tenant=r["tenant"], path=p)
            out.append(f"gpufabric_dpu_offload_flows{lab} {r[p + '_flows']}")
            out.append(f"gpufabric_dpu_offload_bytes{lab} {r[p + '_bytes']}")
    out += ["# TYPE gpufabric_dpu_offload_table_used gauge", "# TYPE gpufabric_dpu_offload_table_capacity gauge"]
    for t in report["tables"]:
        lab = _labels(node=t["node"], nic_model=t["nic_model"])
        out.append(f"gpufabric_dpu_offload_table_used{lab} {t['used']}")
        if t["capacity"] is not None:
            out.append(f"gpufabric_dpu_offload_table_capacity{lab} {t['capacity']}")
    counts: dict[tuple[str, str], int] = {}
    for a in report["alerts"]:
        counts[(a["node"], a["kind"])] = counts.get((a["node"], a["kind"]), 0) + 1
    out.append("# TYPE gpufabric_dpu_offload_alerts gauge")
    out += [f"gpufabric_dpu_offload_alerts{_labels(node=n, kind=k)} {c}" for (n, k), c in sorted(counts.items())]
    return "\n".join(out) + "\n"
