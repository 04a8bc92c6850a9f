"""The contract every NVLink driver passes (fabrics/nvlink/drivers/base.py), over each driver
and its doubles (contract/nvlink_targets.py: the fmpm driver against the lab's stand-in FM
over its unix socket, the in-memory driver): same scenarios, same assertions.

The driver: ``list_partitions`` shows FM's partitions, active set and GPUs; ``activate`` and
``deactivate`` round-trip through it; FM's refusals (an active partition again, an inactive one
off, a partition overlapping an active one, an unknown id, no FM) are one-line
:class:`FmCallError` s of the project's ``FabricError`` tree carrying FM's code, and change
nothing; a node it does not reach is a ConfigError naming the field; a restarted FM lists no
active partition until ``set_activated``; each declared capability works.

The backend over it (``backend.FmBackend``): ``apply`` runs removals before additions, returns
the verified read-back of the nodes it touched (what FM reports now) and is idempotent; a
restarted FM's empty set is observed as such and ``replay`` restores it, verified.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from gpufabric.domain.errors import ConfigError, FabricError, GpufabricError
from gpufabric.fabrics.nvlink.backend import FmBackend
from gpufabric.fabrics.nvlink.drivers.base import DOMAINS, FAILED_DEVICES, REPLAY, UNSUPPORTED, FmCallError
from gpufabric.fabrics.nvlink.plan import NvlinkPlan, PartitionChange
from gpufabric.fabrics.nvlink.readers.fmreturn import FmReturn
from gpufabric.fabrics.nvlink.readers.smi import parse_pdsh, smi_domain
from gpufabric.fabrics.nvlink.segments import table
from gpufabric.fabrics.nvlink.state import NvlinkState

from fabrics.nvlink.contract.nvlink_targets import BOARD, FM_TARGETS, NODES, FmTarget, FmTargetFactory

HGX = {p.id: p.gpus for p in table(BOARD)}
N1, N2 = NODES
IDLE = {N1: [], N2: []}


@pytest.fixture(params=FM_TARGETS)
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FmTarget]:
    factory: FmTargetFactory = request.param
    with factory(tmp_path_factory.mktemp("fm-target")) as t:
        yield t


def change(node: str, activate: bool, pid: int) -> PartitionChange:
    return PartitionChange(node, activate, pid, tuple(sorted(HGX.get(pid, ()))))


def plan(*changes: tuple[str, bool, int]) -> NvlinkPlan:
    return NvlinkPlan(tuple(change(*c) for c in changes))


def actives(state: NvlinkState) -> dict[str, list[int]]:
    return {n: sorted(fm.active) for n, fm in sorted(state.nodes.items())}


def check_fm_error(e: FmCallError, node: str, code: FmReturn) -> None:
    """An FM refusal: the project's FabricError for this node, FM's code, one line naming it."""
    assert isinstance(e, FabricError) and isinstance(e, GpufabricError)
    assert (e.fabric, e.device, e.fm_code) == ("nvlink", node, int(code))
    assert "\n" not in str(e) and str(e).startswith(f"{node}: ")
    assert code.label in e.message  # FM's answer, in words
    assert e.to_json()["error"]["code"] == e.code


def listed(t: FmTarget) -> dict[str, list[int]]:
    return {n: sorted(t.driver.list_partitions(n).active) for n in NODES}


# ---- the driver


def test_list_partitions_of_idle_fms(target: FmTarget) -> None:
    d = target.driver
    assert d.nodes == NODES
    for n in NODES:
        fm = d.list_partitions(n)
        assert fm.node == n and fm.active == frozenset()
        assert {p.id: p.gpus for p in fm.partitions} == HGX
        assert sorted(g.module_id for g in fm.gpus) == list(range(1, 9))


def test_activate_deactivate_list_round_trip(target: FmTarget) -> None:
    d = target.driver
    d.activate(N1, 4)
    d.activate(N2, 1)
    assert listed(target) == {N1: [4], N2: [1]}
    d.activate(N1, 5)  # disjoint GPUs: both active
    assert listed(target) == {N1: [4, 5], N2: [1]}
    d.deactivate(N1, 4)
    d.deactivate(N2, 1)
    assert listed(target) == {N1: [5], N2: []}


REFUSALS = {  # name: (partitions active first, the call, FM's answer)
    "activate-active": ([4], lambda d: d.activate(N1, 4), FmReturn.IN_USE),
    "overlap": ([1], lambda d: d.activate(N1, 3), FmReturn.IN_USE),
    "deactivate-inactive": ([4], lambda d: d.deactivate(N1, 5), FmReturn.UNINITIALIZED),
    "activate-unknown-id": ([4], lambda d: d.activate(N1, 15), FmReturn.BADPARAM),
    "deactivate-past-fm-max": ([4], lambda d: d.deactivate(N1, 64), FmReturn.BADPARAM),
    "replay-overlap": ([4], lambda d: d.set_activated(N1, [1, 3]), FmReturn.IN_USE),
    "replay-unknown-id": ([4], lambda d: d.set_activated(N1, [4, 99]), FmReturn.BADPARAM),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_fm_refusals_are_fm_call_errors_and_change_nothing(target: FmTarget, name: str) -> None:
    first, call, code = REFUSALS[name]
    for pid in first:
        target.driver.activate(N1, pid)
    with pytest.raises(FmCallError) as e:
        call(target.driver)
    check_fm_error(e.value, N1, code)
    assert listed(target) == {N1: first, N2: []}


def test_a_node_it_does_not_reach_is_refused_naming_the_field(target: FmTarget) -> None:
    for call in (lambda: target.driver.activate("gpu-zz", 4), lambda: target.driver.list_partitions("gpu-zz")):
        with pytest.raises(ConfigError) as e:
            call()
        assert e.value.field == "nvlink.options.fm" and "gpu-zz" in str(e.value) and "\n" not in str(e.value)


def test_a_gone_fm_is_a_fabric_error(target: FmTarget) -> None:
    target.stop(N2)
    for call in (lambda: target.driver.list_partitions(N2), lambda: target.driver.activate(N2, 4)):
        with pytest.raises(FmCallError) as e:
            call()
        check_fm_error(e.value, N2, FmReturn.CONNECTION_NOT_VALID)
    assert target.driver.list_partitions(N1).active == frozenset()  # the other node's FM still answers


def test_a_restarted_fm_lists_no_active_partition_until_told(target: FmTarget) -> None:
    d = target.driver
    d.activate(N1, 4)
    d.activate(N1, 5)
    target.restart(N1)
    assert listed(target) == IDLE
    assert REPLAY in d.capabilities
    d.set_activated(N1, [5, 4])
    assert listed(target) == {N1: [4, 5], N2: []}


def test_each_declared_capability_works(target: FmTarget) -> None:
    d = target.driver
    if UNSUPPORTED in d.capabilities:
        assert [d.unsupported(n) for n in NODES] == [frozenset(), frozenset()]
    if FAILED_DEVICES in d.capabilities:
        assert [d.failed_devices(n) for n in NODES] == [(), ()]
    if DOMAINS in d.capabilities:
        assert d.smi_nodes == NODES
        assert [smi_domain(n, d.smi_q(n)).id for n in NODES] == [f"board:{n}" for n in NODES]


# ---- the backend over it


def test_observe_lists_every_node_idle_and_healthy(target: FmTarget) -> None:
    seen = FmBackend(target.driver).observe()
    assert sorted(seen.nodes) == list(NODES)
    for n in NODES:
        fm = seen.nodes[n]
        assert fm.active == frozenset() and fm.unsupported == frozenset() and fm.unhealthy() == frozenset()
        assert {p.id: p.gpus for p in fm.partitions} == HGX


def test_apply_returns_the_verified_read_back(target: FmTarget) -> None:
    b = FmBackend(target.driver)
    back = b.apply(plan((N1, True, 5), (N2, True, 0)))
    again = FmBackend(target.fresh()).observe()  # another backend and driver: nothing remembered
    assert actives(back) == actives(again) == {N1: [5], N2: [0]}
    for n in NODES:
        assert back.nodes[n].partitions == again.nodes[n].partitions
    back = b.apply(plan((N1, False, 5)))
    assert sorted(back.nodes) == [N1] and back.nodes[N1].active == frozenset()
    assert listed(target) == {N1: [], N2: [0]}


def test_apply_runs_removals_before_additions(target: FmTarget) -> None:
    b = FmBackend(target.driver)
    b.apply(plan((N1, True, 1)))  # GPUs 1-4
    back = b.apply(plan((N1, True, 3), (N1, False, 1)))  # GPUs 1,3: only once 1 is gone (listed first on purpose)
    assert back.nodes[N1].active == frozenset({3})
    assert listed(target) == {N1: [3], N2: []}


def test_apply_is_idempotent(target: FmTarget) -> None:
    b = FmBackend(target.driver)
    assert b.apply(plan((N1, True, 4))).nodes[N1].active == frozenset({4})
    assert target.by_hand(N1, 4) is FmReturn.IN_USE  # FM itself answers -7 ...
    assert b.apply(plan((N1, True, 4))).nodes[N1].active == frozenset({4})  # ... the backend counts it done
    assert b.apply(plan((N1, False, 4))).nodes[N1].active == frozenset()
    assert b.apply(plan((N1, False, 4))).nodes[N1].active == frozenset()  # -4 likewise
    assert listed(target) == IDLE


def test_apply_of_an_overlapping_partition_is_refused(target: FmTarget) -> None:
    assert target.by_hand(N1, 1) is FmReturn.SUCCESS  # GPUs 1-4, by hand
    with pytest.raises(FmCallError) as e:
        FmBackend(target.driver).apply(plan((N1, True, 3)))  # GPUs 1,3
    check_fm_error(e.value, N1, FmReturn.IN_USE)
    assert listed(target) == {N1: [1], N2: []}


@pytest.mark.parametrize("activate", [True, False], ids=["activate", "deactivate"])
@pytest.mark.parametrize("pid", [15, 64], ids=["past-the-board", "past-fm-max"])
def test_apply_of_a_bad_partition_id_is_refused_naming_it(target: FmTarget, activate: bool, pid: int) -> None:
    with pytest.raises(FmCallError) as e:
        FmBackend(target.driver).apply(plan((N1, activate, pid)))
    check_fm_error(e.value, N1, FmReturn.BADPARAM)
    assert "partition" in e.value.message.lower()
    assert re.search(rf"(partition|-[ad]) {pid}:", e.value.message), e.value.message  # the id, as asked
    assert listed(target) == IDLE


def test_apply_to_a_node_it_does_not_reach_is_refused_before_any_call(target: FmTarget) -> None:
    with pytest.raises(ConfigError) as e:
        FmBackend(target.driver).apply(plan((N1, True, 4), ("gpu-zz", True, 4)))
    assert e.value.field == "nvlink.options.fm" and "gpu-zz" in str(e.value) and "\n" not in str(e.value)
    assert listed(target) == IDLE  # not even gpu-a01's change ran


def test_an_fm_restart_is_observed_as_such_and_replayed(target: FmTarget) -> None:
    b = FmBackend(target.driver)
    b.apply(plan((N1, True, 4), (N1, True, 5), (N2, True, 2)))
    target.restart(N1)
    assert actives(FmBackend(target.fresh()).observe()) == {N1: [], N2: [2]}  # what FM says, no cached set
    assert b.replay(N1).active == frozenset({4, 5})  # the last set this backend verified
    assert actives(b.observe()) == {N1: [4, 5], N2: [2]}
    target.restart(N1)
    fresh = FmBackend(target.fresh())
    assert fresh.observe().nodes[N1].active == frozenset()
    assert fresh.replay(N1, [5, 4]).active == frozenset({4, 5})  # an explicit set, verified
    with pytest.raises(FmCallError) as e:
        fresh.replay(N1, [1, 3])  # GPUs 1-4 and 1,3 overlap: FM refuses the whole set
    check_fm_error(e.value, N1, FmReturn.IN_USE)
    assert listed(target) == {N1: [4, 5], N2: [2]}


def test_observe_with_a_gone_fm_is_a_fabric_error(target: FmTarget) -> None:
    target.stop(N2)
    with pytest.raises(FmCallError) as e:
        FmBackend(target.driver).observe()
    check_fm_error(e.value, N2, FmReturn.CONNECTION_NOT_VALID)


def test_domains_of_the_backend(target: FmTarget) -> None:
    b = FmBackend(target.driver)
    if DOMAINS not in target.driver.capabilities:
        assert b.domain_nodes == () and b.domains() == {}
        return
    assert b.domain_nodes == NODES
    assert {n: (x.id, x.source) for n, x in b.domains().items()} == {n: (f"board:{n}", "board") for n in NODES}
    assert sorted(parse_pdsh(b.domains_text())) == list(NODES)
