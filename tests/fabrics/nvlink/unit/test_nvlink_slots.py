"""The NVLink kind on a shared host (issue 33): one Fabric Manager partition per live slot.

A hand-built Tenancy: host ``h`` (an 8-GPU HGX board) leased to ``infra`` in ``vm-host``, slots
A (GPUs 1-4, partition 1), B (5,7: partition 5) and C (6,8: partition 6). A slot's move changes
its own partition only; a GPU of no live slot is in no active partition; the host's own lease
holds none; the allocator's choice for a new slot; the audit's shared-host invariants; the view."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import BUILTIN_OFFERINGS, QUARANTINE, Lease, Node
from gpufabric.domain.moves import MoveRequest
from gpufabric.domain.slots import VM_HOST, slot_name
from gpufabric.domain.values import ModuleId
from gpufabric.fabrics.nvlink.entries import Gpu, gpu_ports
from gpufabric.fabrics.nvlink.kind import NvlinkKind
from gpufabric.fabrics.nvlink.plan import NvlinkPlan, PartitionChange
from gpufabric.fabrics.nvlink.segments import table
from gpufabric.fabrics.nvlink.state import GpuInfo, NodeFm, NvlinkState

HGX = table("hgx-h100-8gpu")
KIND = NvlinkKind()
T0 = datetime(2026, 1, 1, tzinfo=UTC)
HOST = "h"
A, B, C = (1, 2, 3, 4), (5, 7), (6, 8)
NA, NB, NC = (slot_name(HOST, m) for m in (A, B, C))
OFFERINGS = {o.name: o for o in BUILTIN_OFFERINGS}


def host(name: str = HOST, modules: tuple[int, ...] = tuple(range(1, 9))) -> Node:
    return Node(name, fabric_ports=gpu_ports(*(Gpu(name, ModuleId(m), f"0000:{m:02x}:00.0") for m in modules)))


def tenancy(
    slots: Mapping[tuple[int, ...], str | None],
    *,
    offering: str = VM_HOST,
    host_tenant: str | None = "infra",
    extra: tuple[Node, ...] = (),
) -> Tenancy:
    """Host ``h`` leased to ``host_tenant`` in ``offering``, one slot node per entry of ``slots``
    (its GPUs -> its tenant, None: in quarantine)."""
    nodes = (host(), *(Node(slot_name(HOST, m), host=HOST, slot_modules=m) for m in slots), *extra)
    owners: dict[str, Lease | None] = {
        HOST: Lease(host_tenant, HOST, T0, offering=offering) if host_tenant else None,
        **{slot_name(HOST, m): (Lease(t, slot_name(HOST, m), T0) if t else None) for m, t in slots.items()},
    }
    return Tenancy(nodes=nodes, owners=owners, networks={}, offerings=OFFERINGS)


def fm(active: set[int], sick: frozenset[int] = frozenset(), unsupported: frozenset[int] = frozenset()) -> NvlinkState:
    gpus = tuple(GpuInfo(m, failed_ports=(3,) if m in sick else ()) for m in range(1, 9))
    return NvlinkState({HOST: NodeFm(HOST, HGX, frozenset(active), gpus, unsupported)})


def changes(t: Tenancy, observed: NvlinkState) -> tuple[PartitionChange, ...]:
    plan = KIND.diff(KIND.desired(t), observed)
    assert isinstance(plan, NvlinkPlan)
    return plan.ordered()


THREE = {A: "alpha", B: "beta", C: "gamma"}


def test_one_partition_per_live_slot_from_nothing() -> None:
    got = changes(tenancy(THREE), fm(set()))
    assert [(c.activate, c.partition, c.gpus, c.tenant) for c in got] == [
        (True, 1, (1, 2, 3, 4), "alpha"),
        (True, 5, (5, 7), "beta"),
        (True, 6, (6, 8), "gamma"),
    ]
    d = KIND.desired(tenancy(THREE))
    assert KIND.as_observed(d).nodes[HOST].active == frozenset({1, 5, 6}) == KIND.active_set(d, HOST)
    assert KIND.diff(d, KIND.as_observed(d)).empty and KIND.diff(d, fm({1, 5, 6})).empty


def test_slot_to_quarantine_deactivates_only_its_partition() -> None:
    got = changes(tenancy({A: "alpha", B: None, C: "gamma"}), fm({1, 5, 6}))
    assert [(c.activate, c.partition, c.gpus) for c in got] == [(False, 5, (5, 7))]
    assert got[0].line() == f"nvlink h: deactivate partition 5 (GPUs 5,7) (slot {NB})" and got[0].slot == NB


def test_slot_to_another_tenant_activates_only_its_partition() -> None:
    # B's move to D: the quarantine phase took partition 5 down; the join brings it up for D
    got = changes(tenancy({A: "alpha", B: "delta", C: "gamma"}), fm({1, 6}))
    assert [(c.activate, c.partition, c.gpus, c.tenant) for c in got] == [(True, 5, (5, 7), "delta")]
    assert got[0].to_dict() == {
        "node": HOST, "action": "activate", "partition": 5, "gpus": [5, 7], "tenant": "delta", "slot": NB,
    }  # fmt: skip
    # and a straight owner change (no quarantine between) changes nothing FM holds: the same GPUs
    assert changes(tenancy({A: "alpha", B: "delta", C: "gamma"}), fm({1, 5, 6})) == ()


def test_gpus_of_no_live_slot_are_in_no_partition() -> None:
    # the whole board active (left from a bare-metal lease) on a host now shared, slot A only
    got = changes(tenancy({A: "alpha"}), fm({0}))
    assert [(c.activate, c.partition) for c in got] == [(False, 0), (True, 1)]  # removal before addition
    # a single GPU of B's, B in quarantine, and a stray pair over C's GPUs: both go, A's stays
    got = changes(tenancy({A: "alpha", B: None}), fm({1, 11, 6}))
    assert [(c.activate, c.partition) for c in got] == [(False, 6), (False, 11)]


def test_the_hosts_own_lease_holds_no_partition() -> None:
    assert [(c.activate, c.partition) for c in changes(tenancy({}), fm({0}))] == [(False, 0)]
    assert changes(tenancy({}), fm(set())) == ()
    assert KIND.desired(tenancy({})).nodes[HOST].gpus == 0


def test_a_not_shared_host_keeps_its_whole_node_behaviour() -> None:
    # the same slot nodes, the host leased bare metal: one partition for the host's lease, the slots ignored
    t = tenancy(THREE, offering="baremetal", host_tenant="acme")
    got = changes(t, fm({1, 5, 6}))
    assert [(c.activate, c.partition, c.tenant) for c in got] == [
        (False, 1, ""),
        (False, 5, ""),
        (False, 6, ""),
        (True, 0, "acme"),
    ]
    # the host in quarantine: everything off, whatever its slot nodes say
    t = tenancy(THREE, host_tenant=None)
    assert [(c.activate, c.partition) for c in changes(t, fm({1, 5, 6}))] == [(False, 1), (False, 5), (False, 6)]


def test_a_slot_whose_gpus_are_no_partition_is_left_out_not_a_crash() -> None:
    odd = (5, 6)  # no partition of the board holds exactly 5 and 6
    t = tenancy({A: "alpha", odd: "beta"})
    assert [(c.activate, c.partition) for c in changes(t, fm(set()))] == [(True, 1)]
    found = [(v.invariant, v.resource, v.tenants) for v in KIND.audit(t, KIND.desired(t), fm({1}))]
    assert found == [("NVLINK-SLOT-PARTITION", f"slot:{slot_name(HOST, odd)}", ("beta",))]
    # FM cannot activate C's partition: nothing is activated for C, the audit says so
    t = tenancy(THREE)
    assert [c.partition for c in changes(t, fm(set(), unsupported=frozenset({6})))] == [1, 5]


def test_tenants_seen_per_slot() -> None:
    t = tenancy({A: "alpha", B: "beta", C: None})
    seen = KIND.tenants_seen(fm({1, 5, 6}), t)
    assert seen == {NA: frozenset({"alpha"}), NB: frozenset({"beta"}), NC: frozenset({QUARANTINE})}


# ---- the allocator's choice for a new slot (the kind's slot_modules hook)


def test_slot_modules_is_the_allocators_choice() -> None:
    h = host()
    assert KIND.slot_modules(h, 2, taken=(*A, *C)) == frozenset(B)
    assert KIND.slot_modules(h, 2, taken=A) == frozenset({5, 7})  # keeps a pair free for a pair, lowest id
    assert KIND.slot_modules(h, 2, taken=()) == frozenset({1, 3})
    assert KIND.slot_modules(h, 4, taken=(*B, 6)) == frozenset(A)
    assert KIND.slot_modules(h, 1, taken=A) == frozenset({5})
    assert KIND.slot_modules(h, 8, taken=()) == frozenset(range(1, 9))
    # GPUs not in the host's inventory are never handed out
    assert KIND.slot_modules(host(modules=(2, 4, 5, 6, 7, 8)), 2, taken=()) == frozenset({2, 4})
    assert KIND.slot_modules(Node("cpu-only"), 2, taken=()) is None  # this kind does not choose


def test_slot_modules_refusal_names_gpus_and_what_is_free() -> None:
    with pytest.raises(ValidationError) as e:
        KIND.slot_modules(host(), 4, taken=(*A, *C))
    assert e.value.field == "gpus" and e.value.allowed == "1 or 2 GPUs (free partitions: 5 [5,7], 11 [5], 13 [7])"
    with pytest.raises(ValidationError) as e:
        KIND.slot_modules(host(), 2, taken=(*A, *B, *C))
    assert e.value.field == "gpus" and "no partition is free" in e.value.allowed


def test_check_slot() -> None:
    KIND.check_slot(host(), frozenset(B))
    KIND.check_slot(Node("cpu-only"), frozenset({5, 6}))  # not this kind's host
    with pytest.raises(ValidationError) as e:
        KIND.check_slot(host(), frozenset({5, 6}))
    assert e.value.field == "gpus" and "no partition of the board" in str(e.value)
    with pytest.raises(ValidationError) as e:
        KIND.check_slot(host(modules=(1, 2, 3)), frozenset(A))
    assert e.value.field == "gpus" and "GPUs 4 are not in the inventory" in str(e.value)


# ---- audit


def audit(t: Tenancy, observed: NvlinkState) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(v.invariant, v.resource, v.tenants) for v in KIND.audit(t, KIND.desired(t), observed)]


def test_audit_clean_when_each_live_slot_has_its_partition() -> None:
    assert audit(tenancy(THREE), fm({1, 5, 6})) == []
    assert audit(tenancy(THREE), fm(set())) == []  # not yet converged is drift, not a violation


def test_audit_partition_not_a_live_slots_gpus() -> None:
    # partition 0 spans all three slots: not one slot's, two tenants' GPUs in one partition
    got = audit(tenancy(THREE), fm({0}))
    assert got == [
        ("NVLINK-SLOT-PARTITION", "partition:0", ("alpha", "beta", "gamma")),
        ("NVLINK-PARTITION-SHARED", "partition:0", ("alpha", "beta", "gamma")),
    ]
    # a pair inside A's four: one tenant, but not exactly a slot's GPUs
    assert audit(tenancy(THREE), fm({3, 5, 6})) == [("NVLINK-SLOT-PARTITION", "partition:3", ("alpha",))]


def test_audit_two_active_partitions_sharing_a_gpu() -> None:
    got = audit(tenancy(THREE), fm({1, 5, 6, 11}))  # 11 = GPU 5, inside B's 5 as well
    assert ("NVLINK-PARTITION-OVERLAP", "partition:5", ()) in got
    assert ("NVLINK-SLOT-PARTITION", "partition:11", ("beta",)) in got


def test_audit_gpu_of_a_slot_in_quarantine_in_an_active_partition() -> None:
    got = audit(tenancy({A: "alpha", B: None, C: "gamma"}), fm({1, 5, 6}))
    assert got == [
        ("NVLINK-SLOT-PARTITION", "partition:5", ()),
        ("NVLINK-SLOT-QUARANTINE", "partition:5", (QUARANTINE,)),
    ]
    # a GPU of no slot at all, in a partition with a live slot's GPUs
    got = audit(tenancy({A: "alpha"}), fm({2}))
    assert ("NVLINK-SLOT-QUARANTINE", "partition:2", (QUARANTINE,)) in got


def test_audit_unhealthy_gpu_of_a_live_slot() -> None:
    got = audit(tenancy(THREE), fm({1, 5, 6}, sick=frozenset({7})))
    assert got == [("NVLINK-UNHEALTHY-LEASED", "gpu:7", ("beta",))]


# ---- views


def test_node_view_lists_the_slots_partitions() -> None:
    t = tenancy({A: "alpha", B: None, C: "gamma"})
    view = KIND.node_view(host(), t)
    assert view["partition_gpus"] == 0
    assert view["slots"] == [
        {"slot": NA, "partition": 1, "gpus": [1, 2, 3, 4], "tenant": "alpha"},
        {"slot": NB, "partition": 5, "gpus": [5, 7], "tenant": QUARANTINE},
        {"slot": NC, "partition": 6, "gpus": [6, 8], "tenant": "gamma"},
    ]
    assert KIND.summary(host(), t) == "6/8 GPUs in 2 slots"
    assert "slots" not in KIND.node_view(host(), tenancy({}, offering="baremetal"))


def test_overlapping_live_slots_never_share_a_partition() -> None:
    # a slot over A's GPUs 1,3 (the allocator never makes one; a corrupted store could): one of the two gets a partition
    pair = (1, 3)
    t = tenancy({A: "alpha", pair: "beta"})
    assert [(c.activate, c.partition, c.tenant) for c in changes(t, fm({1}))] == []  # A's active partition stays
    assert [(c.activate, c.partition, c.tenant) for c in changes(t, fm(set()))] == [(True, 3, "beta")]  # first by name
    found = audit(t, fm({1}))
    assert ("NVLINK-SLOT-PARTITION", f"slot:{slot_name(HOST, A)}", ("alpha", "beta")) in found
    assert ("NVLINK-PARTITION-SHARED", "partition:1", ("alpha", "beta")) in found  # GPUs 1,3 are beta's slot's too


def test_a_slot_nodes_own_view_and_request() -> None:
    t = tenancy({A: "alpha", B: None})
    slot_a, slot_b = (next(n for n in t.nodes if n.name == s) for s in (NA, NB))
    assert KIND.node_view(slot_a, t)["slots"] == [{"slot": NA, "partition": 1, "gpus": [1, 2, 3, 4], "tenant": "alpha"}]
    assert KIND.node_view(slot_a, t)["partition_gpus"] == 4 and KIND.node_view(slot_b, t)["partition_gpus"] == 0
    assert KIND.summary(slot_a, t) == "4 GPUs, partition 1"
    bare = tenancy({A: "alpha"}, offering="baremetal")  # the host not shared: the slot holds nothing
    assert "slots" not in KIND.node_view(slot_a, bare) and KIND.summary(slot_a, bare) == ""
    # a request for a slot may name its own GPU count only
    KIND.check_request(slot_a, MoveRequest("alpha", terms=(("gpus", 4),)))
    with pytest.raises(ValidationError) as e:
        KIND.check_request(slot_a, MoveRequest("alpha", terms=(("gpus", 2),)))
    assert e.value.field == "gpus" and e.value.allowed.startswith("4 (the GPUs of slot")
