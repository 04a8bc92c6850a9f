"""The DPU fabric's state (desired and observed share one type): the items it manages.

The state holds only what this fabric manages: the DPU-role labels and the dpu-host taint on
Kubernetes nodes, the managed keys of each DPU-side OVS (``Open_vSwitch`` row), and the OVN
logical switch ports of tenants (switches named ``gf-<tenant>``)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

SWITCH_PREFIX = "gf-"


def tenant_switch(tenant: str) -> str:
    return f"{SWITCH_PREFIX}{tenant}"


@dataclass(frozen=True, order=True)
class Label:
    k8s_node: str
    key: str
    value: str

    def __str__(self) -> str:
        return f"label {self.k8s_node} {self.key}={self.value}"


@dataclass(frozen=True, order=True)
class Taint:
    k8s_node: str
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"taint {self.k8s_node} {self.key}={self.value}:{self.effect}"

    def to_k8s(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}


@dataclass(frozen=True, order=True)
class OvsSetting:
    """A key of the ``Open_vSwitch`` row of ``node``'s DPU, e.g. ``other_config:hw-offload``."""

    node: str
    key: str
    value: str

    def __str__(self) -> str:
        return f"ovs {self.node} {self.key}={self.value}"


@dataclass(frozen=True, order=True)
class LogicalPort:
    """A tenant's OVN logical switch port for one VF representor of ``node``'s DPU; ``slot``: the
    slot of shared host ``node`` whose VM the port is (issue 33; "" for the host's own ports)."""

    name: str
    tenant: str
    node: str
    mac: str
    representor: str = ""
    slot: str = ""

    @property
    def unit(self) -> str:
        """The node whose lease the port follows: its slot, else its host."""
        return self.slot or self.node

    @property
    def switch(self) -> str:
        return tenant_switch(self.tenant)

    def __str__(self) -> str:
        where = f" slot={self.slot}" if self.slot else ""
        return f"lsp {self.switch}/{self.name} node={self.node}{where} mac={self.mac}"


Item = Label | Taint | OvsSetting | LogicalPort


def item_object(item: Item) -> str:
    """The object an item lives on (the unit a read-back covers)."""
    if isinstance(item, (Label, Taint)):
        return f"k8s:{item.k8s_node}"
    if isinstance(item, OvsSetting):
        return f"ovs:{item.node}"
    return f"ovn:{item.switch}"


@dataclass(frozen=True)
class DpuState:
    """Managed facts of the DPU fabric. ``covered`` is None for a full read, else the objects
    (``k8s:<node>``, ``ovs:<host>``, ``ovn:<switch>``) a partial read-back covers."""

    labels: frozenset[Label] = frozenset()
    taints: frozenset[Taint] = frozenset()
    ovs: frozenset[OvsSetting] = frozenset()
    ports: frozenset[LogicalPort] = frozenset()
    covered: frozenset[str] | None = None
    flows: frozenset[tuple[str, str]] = frozenset()  # (host, tenant) of datapath flows (observe, offload sources only)

    def items(self) -> frozenset[Item]:
        return frozenset[Item]().union(self.labels, self.taints, self.ovs, self.ports)

    @classmethod
    def of(cls, items: Any, covered: frozenset[str] | None = None) -> DpuState:
        its = list(items)
        return cls(
            frozenset(i for i in its if isinstance(i, Label)),
            frozenset(i for i in its if isinstance(i, Taint)),
            frozenset(i for i in its if isinstance(i, OvsSetting)),
            frozenset(i for i in its if isinstance(i, LogicalPort)),
            covered,
        )

    @cached_property
    def _index(self) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]], dict[str, list[Taint]], dict[str, list[LogicalPort]]]:
        """Per-object lookups, built once (an audit of thousands of nodes stays linear)."""
        ovs: dict[str, dict[str, str]] = {}
        labels: dict[str, dict[str, str]] = {}
        taints: dict[str, list[Taint]] = {}
        ports: dict[str, list[LogicalPort]] = {}
        for s in self.ovs:
            ovs.setdefault(s.node, {})[s.key] = s.value
        for x in self.labels:
            labels.setdefault(x.k8s_node, {})[x.key] = x.value
        for t in self.taints:
            taints.setdefault(t.k8s_node, []).append(t)
        for p in self.ports:
            ports.setdefault(p.node, []).append(p)
        return ovs, labels, taints, ports

    def ovs_of(self, node: str) -> dict[str, str]:
        return dict(self._index[0].get(node, {}))

    def labels_of(self, k8s_node: str) -> dict[str, str]:
        return dict(self._index[1].get(k8s_node, {}))

    def taints_of(self, k8s_node: str) -> list[Taint]:
        return list(self._index[2].get(k8s_node, []))

    def ports_of(self, node: str) -> list[LogicalPort]:
        return list(self._index[3].get(node, []))

    def to_dict(self) -> dict[str, Any]:
        return {
            "labels": [vars(x) for x in sorted(self.labels)],
            "taints": [vars(x) for x in sorted(self.taints)],
            "ovs": [vars(x) for x in sorted(self.ovs)],
            "ports": [vars(x) for x in sorted(self.ports)],
        }
