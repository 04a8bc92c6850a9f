"""The NVLink audit invariants: a partition shared by two owners (or active in quarantine),
a leased GPU in a partition not its tenant's, an unhealthy GPU leased."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import QUARANTINE, Lease, Node
from gpufabric.domain.severity import Severity
from gpufabric.domain.values import ModuleId
from gpufabric.fabrics.nvlink.entries import Gpu, gpu_ports
from gpufabric.fabrics.nvlink.kind import NvlinkKind
from gpufabric.fabrics.nvlink.segments import table
from gpufabric.fabrics.nvlink.state import GpuInfo, NodeFm, NvlinkState

HGX = table("hgx-h100-8gpu")
KIND = NvlinkKind()
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def tenancy(owner: tuple[str, int | None] | None) -> Tenancy:
    n = Node("a", fabric_ports=gpu_ports(*(Gpu("a", ModuleId(m)) for m in range(1, 9))))
    return Tenancy(nodes=(n,), owners={"a": Lease(owner[0], "a", T0, terms=(("gpus", owner[1]),)) if owner else None}, networks={})


def findings(owner: tuple[str, int | None] | None, active: set[int], sick: dict[int, GpuInfo] | None = None) -> list[tuple[str, str, tuple[str, ...]]]:
    gpus = tuple((sick or {}).get(m, GpuInfo(m, state="Completed", status="Success")) for m in range(1, 9))
    t = tenancy(owner)
    obs = NvlinkState({"a": NodeFm("a", HGX, frozenset(active), gpus)})
    return [(v.invariant, v.resource, v.tenants) for v in KIND.audit(t, KIND.desired(t), obs)]


@pytest.mark.parametrize(
    ("owner", "active", "want"),
    [
        (("alpha", 2), {3}, []),
        (("alpha", 2), {6}, []),
        (("alpha", None), {0}, []),
        (None, set(), []),
        (None, {5}, [("NVLINK-PARTITION-SHARED", "partition:5", (QUARANTINE,))]),
        (("alpha", 2), {1}, [("NVLINK-PARTITION-SHARED", "partition:1", ("alpha", QUARANTINE))]),
        (("alpha", 2), {3, 6}, [("NVLINK-PARTITION-SHARED", "partition:6", (QUARANTINE,))]),
        (("alpha", 2), {7, 9}, [("NVLINK-FOREIGN", "partition:7", ("alpha",)), ("NVLINK-FOREIGN", "partition:9", ("alpha",))]),
    ],
    ids=["pair-ok", "kept-pair-ok", "whole-ok", "quarantine-ok", "active-in-quarantine", "by-hand-half-across-owners",
         "second-partition", "singles-instead-of-pair"],
)
def test_sharing_and_foreign(owner: tuple[str, int | None] | None, active: set[int], want: list[object]) -> None:
    assert findings(owner, active) == want


def test_unhealthy_gpu_in_the_leased_partition() -> None:
    sick = {3: GpuInfo(3, state="In Progress", status="N/A")}
    got = findings(("alpha", 2), {3}, sick)
    assert got == [("NVLINK-UNHEALTHY-LEASED", "gpu:3", ("alpha",))]
    assert findings(("alpha", 2), {4}, sick) == []  # the other pair is fine


def test_failed_links_count_as_unhealthy_and_a_lease_that_cannot_fit_is_reported() -> None:
    sick = {5: GpuInfo(5, state="Completed", status="Success", failed_ports=(7,))}
    assert findings(("alpha", None), set(), sick) == [("NVLINK-UNHEALTHY-LEASED", "gpu:5", ("alpha",))]
    assert findings(("alpha", None), {0}, sick) == [("NVLINK-UNHEALTHY-LEASED", "gpu:5", ("alpha",))]


def test_violation_fields() -> None:
    t = tenancy(None)
    obs = NvlinkState({"a": NodeFm("a", HGX, frozenset({0}))})
    (v,) = KIND.audit(t, KIND.desired(t), obs)
    assert v.severity is Severity.CRITICAL and v.fabric == "nvlink" and v.node == "a"
    assert "quarantine" in v.message and v.to_dict()["invariant"] == "NVLINK-PARTITION-SHARED"


def test_nodes_not_read_are_skipped() -> None:
    t = tenancy(("alpha", 2))
    assert list(KIND.audit(t, KIND.desired(t), NvlinkState())) == []


@pytest.mark.parametrize(
    ("info", "healthy"),
    [
        (GpuInfo(1), True),
        (GpuInfo(1, state="Completed", status="Success"), True),
        (GpuInfo(1, state="Completed", status="Failure"), False),
        (GpuInfo(1, state="Not Supported", status="N/A"), False),
        (GpuInfo(1, links_available=16, links_max=18), False),
        (GpuInfo(1, failed_ports=(3,)), False),
    ],
    ids=["unknown", "completed", "failure", "not-supported", "links-down", "failed-ports"],
)
def test_gpu_health(info: GpuInfo, healthy: bool) -> None:
    assert info.healthy is healthy
