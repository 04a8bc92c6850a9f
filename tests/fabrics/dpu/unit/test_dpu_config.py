"""DpuKind.build: the ``dpu:`` section of fabrics.yaml is checked (field + allowed), and the
backend refuses a plan its configuration cannot carry before doing any I/O."""

from __future__ import annotations

from typing import Any

import pytest

from gpufabric.domain.errors import ConfigError
from gpufabric.fabrics.dpu.backend import DpuBackend
from gpufabric.fabrics.dpu.drivers.host.ovs import DpuOvsDriver
from gpufabric.fabrics.dpu.drivers.k8s.nodes import K8sNodeDriver
from gpufabric.fabrics.dpu.drivers.ovn.northbound import OvnNbDriver
from gpufabric.fabrics.dpu.kind import DpuKind
from gpufabric.fabrics.dpu.plan import DpuChange, DpuPlan
from gpufabric.fabrics.dpu.state import Label, OvsSetting

DRIVERS: dict[str, type] = {"dpu-ovsdb": DpuOvsDriver, "ovn-nb": OvnNbDriver, "k8s-nodes": K8sNodeDriver}
OK: dict[str, Any] = {"ovn_nb": "unix:/run/ovn/nb.sock", "ovsdb": {"gpu-a01": "tcp:192.0.2.11:6640"}}


def test_build_ok() -> None:
    b = DpuKind().build(OK | {"kubernetes": {"host": "http://127.0.0.1:1"}}, DRIVERS.__getitem__, {})
    assert isinstance(b, DpuBackend) and set(b.ovs) == {"gpu-a01"} and b.k8s is not None


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ([], "dpu"),
        (OK | {"colour": 1}, "dpu.colour"),
        ({"ovsdb": {}}, "dpu.ovn_nb"),
        (OK | {"ovn_nb": "nb.sock"}, "dpu.ovn_nb"),
        (OK | {"ovsdb": ["x"]}, "dpu.ovsdb"),
        (OK | {"ovsdb": {"gpu-a01": "10.0.0.1"}}, "dpu.ovsdb.gpu-a01"),
        (OK | {"timeout": 0}, "dpu.timeout"),
        (OK | {"timeout": True}, "dpu.timeout"),
        (OK | {"kubernetes": "yes"}, "dpu.kubernetes"),
        (OK | {"kubernetes": {"url": "x"}}, "dpu.kubernetes.url"),
        (OK | {"kubernetes": {}}, "dpu.kubernetes.host"),
    ],
    ids=["not-mapping", "unknown-key", "no-nb", "bad-nb", "ovsdb-list", "bad-remote", "zero-timeout",
         "bool-timeout", "k8s-not-mapping", "k8s-unknown-key", "k8s-no-host"],
)
def test_build_refuses(section: Any, field: str) -> None:
    with pytest.raises(ConfigError) as e:
        DpuKind().build(section, DRIVERS.__getitem__, {})
    assert e.value.field == field


def test_apply_refuses_unconfigured_host_and_missing_kubernetes_before_io() -> None:
    b = DpuKind().build(OK, DRIVERS.__getitem__, {})  # remotes point nowhere: any I/O would fail differently
    with pytest.raises(ConfigError, match=r"dpu\.ovsdb\.gpu-a09"):
        b.apply(DpuPlan((DpuChange("add", OvsSetting("gpu-a09", "external_ids:gpufabric-tenant", "x")),)))
    with pytest.raises(ConfigError, match=r"dpu\.kubernetes"):
        b.apply(DpuPlan((DpuChange("add", Label("gpu-a01", "k8s.ovn.org/dpu-host", "")),)))
    with pytest.raises(TypeError):
        b.apply(object())  # type: ignore[arg-type]
