"""The NVLink FabricKind: desired slice from the tenancy, diff into (de)activations with
removals first, previews, merge, ownership, lease GPU counts, and building the backend."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime

import pytest

from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.fabric import FabricBackend, Tenancy
from gpufabric.domain.models import QUARANTINE, Lease, Node
from gpufabric.domain.values import ModuleId
from gpufabric.fabrics.nvlink.backend import FmpmDriver
from gpufabric.fabrics.nvlink.drivers.fmpm.driver import Fmpm, FmpmConfig
from gpufabric.fabrics.nvlink.entries import Gpu, gpu_ports
from gpufabric.fabrics.nvlink.kind import NvlinkKind, lease_gpus
from gpufabric.fabrics.nvlink.plan import NvlinkPlan
from gpufabric.fabrics.nvlink.segments import table
from gpufabric.fabrics.nvlink.state import GpuInfo, NodeFm, NvlinkState

HGX = table("hgx-h100-8gpu")
KIND = NvlinkKind()
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def node(name: str, modules: range | tuple[int, ...] = range(1, 9)) -> Node:
    return Node(name, fabric_ports=gpu_ports(*(Gpu(name, ModuleId(m), f"0000:{m:02x}:00.0") for m in modules)))


def tenancy(owners: dict[str, tuple[str, int | None] | None], nodes: tuple[Node, ...] | None = None) -> Tenancy:
    ns = nodes or tuple(node(n) for n in owners)
    leases = {n: (Lease(o[0], n, T0, terms=(("gpus", o[1]),)) if o else None) for n, o in owners.items()}
    return Tenancy(nodes=ns, owners=leases, networks={})


def observed(**active: set[int]) -> NvlinkState:
    return NvlinkState({n: NodeFm(n, HGX, frozenset(a)) for n, a in active.items()})


def lines(plan: object) -> list[str]:
    assert isinstance(plan, NvlinkPlan)
    return plan.lines()


def test_desired_counts_per_node() -> None:
    t = tenancy({"a": ("alpha", 2), "b": ("beta", None), "c": None}, (node("a"), node("b"), node("c"), Node("d")))
    d = KIND.desired(t)
    assert {n: (w.tenant, w.gpus) for n, w in d.nodes.items()} == {"a": ("alpha", 2), "b": ("beta", 8), "c": (QUARANTINE, 0)}
    assert KIND.desired(t) == d  # deterministic


def test_diff_from_nothing_activates_the_allocated_partition() -> None:
    d = KIND.desired(tenancy({"a": ("alpha", 2), "b": ("beta", None)}))
    assert lines(KIND.diff(d, observed(a=set(), b=set()))) == [
        "nvlink a: activate partition 3 (GPUs 1,3) for alpha",
        "nvlink b: activate partition 0 (GPUs 1,2,3,4,5,6,7,8) for beta",
    ]


def test_diff_keeps_an_active_partition_that_still_fits() -> None:
    d = KIND.desired(tenancy({"a": ("alpha", 2)}))
    assert KIND.diff(d, observed(a={6})).empty
    assert KIND.diff(d, KIND.as_observed(d)).empty


def test_move_deactivates_before_it_activates() -> None:
    d = KIND.desired(tenancy({"a": ("beta", 4)}))
    plan = KIND.diff(d, observed(a={3, 9}))
    assert lines(plan) == [
        "nvlink a: deactivate partition 3 (GPUs 1,3)",
        "nvlink a: deactivate partition 9 (GPUs 3)",
        "nvlink a: activate partition 1 (GPUs 1,2,3,4) for beta",
    ]
    removals, additions = plan.split()
    assert [c.activate for c in removals.changes] == [False, False] and [c.activate for c in additions.changes] == [True]
    assert plan.to_dict()[2] == {"node": "a", "action": "activate", "partition": 1, "gpus": [1, 2, 3, 4], "tenant": "beta"}
    assert len(plan) == 3 and "deactivate partition 3" in str(plan)


def test_quarantine_deactivates_everything() -> None:
    d = KIND.desired(tenancy({"a": None}))
    assert lines(KIND.diff(d, observed(a={1, 5}))) == [
        "nvlink a: deactivate partition 1 (GPUs 1,2,3,4)",
        "nvlink a: deactivate partition 5 (GPUs 5,7)",
    ]
    assert KIND.diff(d, observed(a=set())).empty
    assert str(NvlinkPlan()) == "no changes"


def test_diff_avoids_unhealthy_gpus_and_refuses_what_cannot_fit() -> None:
    sick = NodeFm("a", HGX, frozenset({3}), tuple(GpuInfo(m, failed_ports=(2,) if m == 1 else ()) for m in range(1, 9)))
    d = KIND.desired(tenancy({"a": ("alpha", 2)}))
    assert lines(KIND.diff(d, NvlinkState({"a": sick}))) == [
        "nvlink a: deactivate partition 3 (GPUs 1,3)",
        "nvlink a: activate partition 4 (GPUs 2,4) for alpha",
    ]
    with pytest.raises(ValidationError) as e:
        KIND.diff(KIND.desired(tenancy({"a": ("alpha", None)})), NvlinkState({"a": sick}))
    assert e.value.field == "gpus"


def test_nodes_not_in_the_inventory_are_left_alone() -> None:
    d = KIND.desired(tenancy({"a": None}))
    assert KIND.diff(d, observed(a=set(), other={0})).empty


def test_merge_and_empty_state() -> None:
    assert KIND.empty_state() == NvlinkState()
    merged = KIND.merge(observed(a={0}, b={1}), observed(b={2}))
    assert {n: set(fm.active) for n, fm in merged.nodes.items()} == {"a": {0}, "b": {2}}


def test_tenants_seen_are_the_owners_of_nodes_with_active_partitions() -> None:
    t = tenancy({"a": ("alpha", 2), "b": None, "c": ("gamma", 1)})
    seen = KIND.tenants_seen(observed(a={3}, b={0}, c=set()), t)
    assert seen == {"a": frozenset({"alpha"}), "b": frozenset({QUARANTINE})}


@pytest.mark.parametrize(
    ("modules", "gpus", "want"),
    [(range(1, 9), None, 8), (range(1, 9), 4, 4), ((2, 4, 6, 8), 2, 2), ((2, 4, 6, 8), None, None), ((), None, 0)],
    ids=["all", "half", "pair-of-partial-node", "partial-node-whole", "no-gpus"],
)
def test_lease_gpus(modules: tuple[int, ...], gpus: int | None, want: int | None) -> None:
    n = node("a", modules)
    if want is None:
        with pytest.raises(ValidationError) as e:
            lease_gpus(n, gpus)
        assert e.value.field == "gpus" and "4 [2,4]" in e.value.allowed
    else:
        assert lease_gpus(n, gpus) == want


def test_build_from_section() -> None:
    drivers = {"fmpm": FmpmDriver}
    backend = KIND.build(
        {"driver": "fmpm", "options": {"fmpm": "fmpm", "fm": {"a": "unix:/run/fm.sock", "b": "tcp:10.0.0.2"}}},
        drivers.__getitem__,
        {},
    )
    assert isinstance(backend, FabricBackend) and isinstance(backend, FmpmDriver)
    assert backend.fm == {"a": ["--unix-domain-socket", "/run/fm.sock"], "b": ["--hostname", "10.0.0.2"]}


def test_driver_built_from_a_config_or_its_options() -> None:
    """The options have one source, FmpmConfig: the registered driver and Fmpm take it or its fields."""
    conf = FmpmConfig(fm={"a": "unix:/run/fm.sock"}, fmpm="fmpm -v", timeout=3, smi={"a": ["ssh", "a", "nvidia-smi", "-q"]})
    by_conf = FmpmDriver(conf, workers=2)
    by_options = FmpmDriver(fm={"a": "unix:/run/fm.sock"}, fmpm="fmpm -v", timeout=3,
                            smi={"a": ["ssh", "a", "nvidia-smi", "-q"]}, workers=2)  # fmt: skip
    for d in (by_conf, by_options, FmpmDriver(**conf.__dict__, workers=2)):
        assert d.fmpm.config == conf and d.workers == 2
        assert (d.fm, d.fmpm.fmpm, d.fmpm.timeout, d.fmpm.smi) == (
            {"a": ["--unix-domain-socket", "/run/fm.sock"]}, ["fmpm", "-v"], 3.0, {"a": ["ssh", "a", "nvidia-smi", "-q"]})
    assert Fmpm(conf).fm == by_conf.fm and FmpmDriver(fm={"a": "h"}).workers == 8
    assert list(inspect.signature(FmpmDriver).parameters) == ["config", "workers", "options"]
    with pytest.raises(TypeError, match="not both"):
        FmpmDriver(conf, timeout=5)
    with pytest.raises(TypeError, match="FmpmConfig, not dict"):
        FmpmDriver({"a": "h"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="nope"):
        Fmpm(fm={"a": "h"}, nope=1)


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ("fmpm", "nvlink"),
        ({"driver": "fmpm", "options": {"fm": {}}}, "nvlink.options.fm"),
        ({"driver": "fmpm", "options": {"fm": {"a": "10.0.0.2:7000"}}}, "nvlink.options.fm.a"),
        ({"driver": "fmpm", "options": {"fm": {"a": "unix:"}}}, "nvlink.options.fm.a"),
        ({"driver": "fmpm", "options": {"fm": {"a": "h"}, "nope": 1}}, "nvlink.options"),
        ({"driver": "fmpm", "options": {"fm": {"a": "h"}, "timeout": 0}}, "nvlink.options.timeout"),
        ({"driver": "dict", "options": {}}, "nvlink.driver"),
    ],
    ids=["not-a-mapping", "no-fm", "port", "empty-socket", "unknown-option", "timeout", "not-a-backend"],
)
def test_build_refuses_bad_sections(section: object, field: str) -> None:
    drivers = {"fmpm": FmpmDriver, "dict": dict}
    with pytest.raises(ConfigError) as e:
        KIND.build(section, drivers.__getitem__, {})
    assert e.value.field == field


def test_summary_and_invariants() -> None:
    assert KIND.summary(node("a")) == "8 GPUs" and KIND.summary(Node("b")) == ""  # who holds "a" unknown
    assert [i.id for i in KIND.invariants()] == ["NVLINK-PARTITION-SHARED", "NVLINK-FOREIGN", "NVLINK-UNHEALTHY-LEASED"]


def test_registered_under_the_entry_point_groups() -> None:
    from importlib.metadata import entry_points

    kinds = {ep.name: ep.load() for ep in entry_points(group="gpufabric.fabrics")}
    drivers = {ep.name: ep.load() for ep in entry_points(group="gpufabric.drivers")}
    assert kinds["nvlink"] is NvlinkKind and drivers["fmpm"] is FmpmDriver
