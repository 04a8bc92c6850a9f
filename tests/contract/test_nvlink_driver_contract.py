"""The contract every NVLink driver passes (fabrics/nvlink/drivers/base.py), over each driver
and its doubles (contract/nvlink_targets.py: the fmpm driver against the lab's stand-in FM
over its unix socket, the in-memory driver): same scenarios, same assertions.

``observe`` lists every node's partitions, active set and GPUs; ``apply`` runs removals before
additions, returns the verified read-back of the nodes it touched (what FM reports now) and is
idempotent; FM's refusals (a partition overlapping an active one, an unknown partition id, no
FM) are one-line :class:`FmCallError` s of the project's ``FabricError`` tree carrying FM's
code, and change nothing; a node the driver does not reach is refused before any call, naming
the field; a restarted FM's empty active set is observed as such and ``replay`` restores it,
verified; each declared capability works.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from gpufabric.domain.errors import ConfigError, FabricError, GpufabricError
from gpufabric.fabrics.nvlink.drivers.base import DOMAINS, FAILED_DEVICES, REPLAY, FmCallError
from gpufabric.fabrics.nvlink.plan import NvlinkPlan, PartitionChange
from gpufabric.fabrics.nvlink.readers.fmreturn import FmReturn
from gpufabric.fabrics.nvlink.readers.smi import parse_pdsh
from gpufabric.fabrics.nvlink.segments import table
from gpufabric.fabrics.nvlink.state import NvlinkState

from contract.nvlink_targets import BOARD, FM_TARGETS, NODES, FmTarget, FmTargetFactory

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


def test_observe_lists_every_node_idle(target: FmTarget) -> None:
    seen = target.driver.observe()
    assert target.driver.nodes == NODES and sorted(seen.nodes) == list(NODES)
    for n in NODES:
        fm = seen.nodes[n]
        assert fm.node == n and fm.active == frozenset() and fm.unsupported == frozenset()
        assert {p.id: p.gpus for p in fm.partitions} == HGX
        assert sorted(g.module_id for g in fm.gpus) == list(range(1, 9))
        assert fm.unhealthy() == frozenset()


def test_activate_then_deactivate_round_trip(target: FmTarget) -> None:
    d = target.driver
    back = d.apply(plan((N1, True, 4)))
    assert sorted(back.nodes) == [N1] and back.nodes[N1].active == frozenset({4})
    assert actives(d.observe()) == {N1: [4], N2: []}
    back = d.apply(plan((N1, False, 4)))
    assert sorted(back.nodes) == [N1] and back.nodes[N1].active == frozenset()
    assert actives(d.observe()) == IDLE


def test_read_back_is_what_fm_reports_now(target: FmTarget) -> None:
    back = target.driver.apply(plan((N1, True, 5), (N2, True, 0)))
    again = target.fresh().observe()  # another driver: nothing remembered, all read
    assert actives(back) == actives(again) == {N1: [5], N2: [0]}
    for n in NODES:
        assert back.nodes[n].partitions == again.nodes[n].partitions
        assert [g.module_id for g in back.nodes[n].gpus] == [g.module_id for g in again.nodes[n].gpus]


def test_removals_run_before_additions(target: FmTarget) -> None:
    d = target.driver
    d.apply(plan((N1, True, 1)))  # GPUs 1-4
    back = d.apply(plan((N1, True, 3), (N1, False, 1)))  # GPUs 1,3: only once 1 is gone (listed first on purpose)
    assert back.nodes[N1].active == frozenset({3})
    assert actives(d.observe()) == {N1: [3], N2: []}


def test_apply_is_idempotent(target: FmTarget) -> None:
    d = target.driver
    assert d.apply(plan((N1, True, 4))).nodes[N1].active == frozenset({4})
    assert target.by_hand(N1, 4) is FmReturn.IN_USE  # FM itself answers -7 ...
    assert d.apply(plan((N1, True, 4))).nodes[N1].active == frozenset({4})  # ... the driver counts it done
    assert d.apply(plan((N1, False, 4))).nodes[N1].active == frozenset()
    assert d.apply(plan((N1, False, 4))).nodes[N1].active == frozenset()  # -4 likewise
    assert actives(d.observe()) == IDLE


def test_a_partition_overlapping_an_active_one_is_refused(target: FmTarget) -> None:
    assert target.by_hand(N1, 1) is FmReturn.SUCCESS  # GPUs 1-4, by hand
    with pytest.raises(FmCallError) as e:
        target.driver.apply(plan((N1, True, 3)))  # GPUs 1,3
    check_fm_error(e.value, N1, FmReturn.IN_USE)
    assert actives(target.driver.observe()) == {N1: [1], N2: []}


@pytest.mark.parametrize("activate", [True, False], ids=["activate", "deactivate"])
@pytest.mark.parametrize("pid", [15, 64], ids=["past-the-board", "past-fm-max"])
def test_a_bad_partition_id_is_refused_naming_it(target: FmTarget, activate: bool, pid: int) -> None:
    with pytest.raises(FmCallError) as e:
        target.driver.apply(plan((N1, activate, pid)))
    check_fm_error(e.value, N1, FmReturn.BADPARAM)
    assert "partition" in e.value.message.lower()
    assert re.search(rf"(partition|-[ad]) {pid}:", e.value.message), e.value.message  # the id, as asked
    assert actives(target.driver.observe()) == IDLE


def test_a_node_it_does_not_reach_is_refused_before_any_call(target: FmTarget) -> None:
    with pytest.raises(ConfigError) as e:
        target.driver.apply(plan((N1, True, 4), ("gpu-zz", True, 4)))
    assert e.value.field == "nvlink.options.fm" and "gpu-zz" in str(e.value) and "\n" not in str(e.value)
    assert actives(target.driver.observe()) == IDLE  # not even gpu-a01's change ran


def test_an_fm_restart_forgets_the_active_set_observed_as_such(target: FmTarget) -> None:
    d = target.driver
    assert REPLAY in d.capabilities
    d.apply(plan((N1, True, 4), (N1, True, 5), (N2, True, 2)))
    target.restart(N1)
    assert actives(target.fresh().observe()) == {N1: [], N2: [2]}  # what FM says, no cached set
    assert d.replay(N1).active == frozenset({4, 5})  # the last set this driver verified
    assert actives(d.observe()) == {N1: [4, 5], N2: [2]}
    target.restart(N1)
    fresh = target.fresh()
    assert fresh.observe().nodes[N1].active == frozenset()
    assert fresh.replay(N1, [5, 4]).active == frozenset({4, 5})  # an explicit set, verified
    with pytest.raises(FmCallError) as e:
        fresh.replay(N1, [1, 3])  # GPUs 1-4 and 1,3 overlap: FM refuses the whole set
    check_fm_error(e.value, N1, FmReturn.IN_USE)
    assert actives(target.fresh().observe()) == {N1: [4, 5], N2: [2]}


def test_a_gone_fm_is_a_fabric_error(target: FmTarget) -> None:
    d = target.driver
    target.stop(N2)
    with pytest.raises(FmCallError) as e:
        d.observe()
    check_fm_error(e.value, N2, FmReturn.CONNECTION_NOT_VALID)
    with pytest.raises(FmCallError) as e:
        d.apply(plan((N2, True, 4)))
    check_fm_error(e.value, N2, FmReturn.CONNECTION_NOT_VALID)
    assert d.read_node(N1).active == frozenset()  # the other node's FM still answers


def test_each_declared_capability_works(target: FmTarget) -> None:
    d = target.driver
    assert {"observe", "apply"} <= d.capabilities
    if FAILED_DEVICES in d.capabilities:
        assert [d.failed_devices(n) for n in NODES] == [(), ()]
    if DOMAINS in d.capabilities:
        assert d.domain_nodes == NODES
        assert {n: (x.id, x.source) for n, x in d.domains().items()} == {n: (f"board:{n}", "board") for n in NODES}
        assert sorted(parse_pdsh(d.domains_text())) == list(NODES)
