"""``dpu.kubernetes_dpu``: the DPU nodes' own cluster — checked like ``dpu.kubernetes`` (errors
name ``dpu.kubernetes_dpu.*``), only with a host cluster, reported by the audit under its own
name when insecure, and the split routes DPU-node labels to it and the rest to the host cluster."""

from __future__ import annotations

from typing import Any

import pytest

from gpufabric.domain.errors import ConfigError
from gpufabric.fabrics.dpu.drivers.host.ovs import DpuOvsDriver
from gpufabric.fabrics.dpu.drivers.k8s.nodes import K8sNodeDriver, SplitK8sDriver
from gpufabric.fabrics.dpu.drivers.ovn.northbound import OvnNbDriver
from gpufabric.fabrics.dpu.kind import DpuKind
from gpufabric.fabrics.dpu.state import Label, Taint

DRIVERS: dict[str, type] = {"dpu-ovsdb": DpuOvsDriver, "ovn-nb": OvnNbDriver, "k8s-nodes": K8sNodeDriver}
OK: dict[str, Any] = {"ovn_nb": "unix:/run/ovn/nb.sock", "ovsdb": {"gpu-a01": "unix:/x.sock"},
                      "kubernetes": {"host": "http://127.0.0.1:1"}}  # fmt: skip


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ({k: v for k, v in OK.items() if k != "kubernetes"} | {"kubernetes_dpu": {"host": "http://127.0.0.1:2"}},
         "dpu.kubernetes_dpu"),
        (OK | {"kubernetes_dpu": "yes"}, "dpu.kubernetes_dpu"),
        (OK | {"kubernetes_dpu": {"url": "x"}}, "dpu.kubernetes_dpu.url"),
        (OK | {"kubernetes_dpu": {}}, "dpu.kubernetes_dpu.host"),
        (OK | {"kubernetes_dpu": {"host": "https://b:6443", "verify_ssl": "no"}}, "dpu.kubernetes_dpu.verify_ssl"),
    ],
)  # fmt: skip
def test_bad_second_cluster_is_refused_naming_the_field(section: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as ei:
        DpuKind().build(section, DRIVERS.__getitem__, {})
    assert ei.value.field == field


def test_second_cluster_built_and_its_transport_reported() -> None:
    b: Any = DpuKind().build(OK | {"kubernetes_dpu": {"host": "https://b.example:6443", "verify_ssl": False}},
                             DRIVERS.__getitem__, {})  # fmt: skip
    assert isinstance(b.k8s, SplitK8sDriver) and b.k8s.dpus.host == "https://b.example:6443"
    assert b.drainer is not None and b.drainer.api is b.k8s.hosts.api  # cordon/drain: the host cluster
    assert [(n.device, n.setting) for n in b.transport_notes()] == [("kubernetes_dpu", "verify_ssl")]
    one: Any = DpuKind().build(OK, DRIVERS.__getitem__, {})
    assert isinstance(one.k8s, K8sNodeDriver)  # one API stays the default


class _Rec:
    def __init__(self) -> None:
        self.calls: list[tuple[list[Any], list[Any]]] = []

    def apply(self, rm: list[Any], add: list[Any]) -> tuple[frozenset[Label], frozenset[Taint]]:
        self.calls.append((rm, add))
        return frozenset(i for i in add if isinstance(i, Label)), frozenset(i for i in add if isinstance(i, Taint))


def test_split_routes_dpu_labels_to_the_dpu_cluster() -> None:
    a, b = _Rec(), _Rec()
    host_l, dpu_l = Label("gpu-a01", "k8s.ovn.org/dpu-host", ""), Label("gpu-a01-bf0", "k8s.ovn.org/dpu", "")
    taint = Taint("gpu-a01", "k8s.ovn.org/dpu-host", "", "NoSchedule")
    labels, taints = SplitK8sDriver(a, b).apply([], [host_l, dpu_l, taint])
    assert a.calls == [([], [host_l, taint])] and b.calls == [([], [dpu_l])]
    assert labels == {host_l, dpu_l} and taints == {taint}
    a.calls.clear()
    SplitK8sDriver(a, b).apply([], [dpu_l])
    assert a.calls == []  # nothing for the host cluster: not called
