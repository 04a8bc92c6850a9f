"""The ``FabricKind`` conformance suite (NAPALM's ``BaseTestGetters`` style): every kind
registered under the ``gpufabric.fabrics`` entry points, and the in-memory test kind, must

1. read back what it wants: ``diff(d, as_observed(d))`` is empty for any generated tenancy;
2. never grant access with the removals half of a plan: applying it to any observed state
   adds no tenant to any node's ``tenants_seen``;
3. merge idempotently: ``merge(merge(o, r), r) == merge(o, r)`` for the read-back ``r`` of a
   plan (its removals alone, all of it) and for a full read;
4. converge: applying a plan (whole, or removals then additions) to any observed state gives
   a state whose plan is empty;
5. move safely: for any move of a node from tenant A to tenant B, through quarantine (the
   engine's two phases) or in one step, with each plan split into removals then additions,
   no intermediate state shows a node in two tenants, and once the quarantine phase is done
   the node holds nothing of A (seen under A's tenancy too). Item 5 is also checked over all
   kinds at once, each fabric's part applied in any order (these are the safe-move
   properties that tests/unit/test_planning_properties.py ran over Ethernet, InfiniBand and
   the memory kind).

Each kind's fixtures (nodes with ports on it, network segments, observed states, a pure
simulator of its backend's read-back) are one file in tests/contract/kinds/.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import entry_points
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufabric.domain.models import QUARANTINE, Lease, Node
from gpufabric.domain.values import ModuleId
from gpufabric.fabrics.nvlink.entries import Gpu, gpu_ports
from gpufabric.planning.plan import as_observed, tenants_seen

from contract.kind_world import T0, World
from contract.kinds import TENANTS, KindCase, all_cases

CASES = all_cases()
PROPS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MOVES = [(x, y) for x in (QUARANTINE, *TENANTS) for y in (QUARANTINE, *TENANTS) if x != y]


def test_every_registered_kind_has_a_case() -> None:
    registered = {ep.name: ep.load() for ep in entry_points(group="gpufabric.fabrics")}
    cases = {c.name: c for c in CASES}
    assert {"ethernet", "infiniband", "nvlink", "dpu"} <= set(registered)
    missing = sorted(set(registered) - set(cases))
    assert not missing, f"no conformance case for {missing}: add tests/contract/kinds/<kind>.py"
    for name, cls in registered.items():
        assert type(cases[name].kind) is cls, f"{name}: the case tests {type(cases[name].kind)}, not {cls}"
    assert "memory" in cases  # the in-memory kind is held to the same contract


@pytest.fixture(scope="class", params=CASES, ids=[c.name for c in CASES])
def case(request: pytest.FixtureRequest) -> Iterator[KindCase]:
    yield request.param


class BaseTestFabricKind:
    """The contract, one method per property, run once per kind (the ``case`` fixture)."""

    @PROPS
    @given(data=st.data())
    def test_diff_of_desired_and_its_read_back_is_empty(self, case: KindCase, data: st.DataObject) -> None:
        w = World([case])
        nodes = data.draw(w.inventories())
        want = w.desired(nodes, w.leases(data.draw, nodes))
        d = want.get(case.name)
        p = case.kind.diff(d, case.kind.as_observed(d))
        assert p.empty, p.lines()

    @PROPS
    @given(data=st.data())
    def test_removals_never_grant_access(self, case: KindCase, data: st.DataObject) -> None:
        w, k = World([case]), case.kind
        nodes = data.draw(w.inventories())
        want = w.desired(nodes, w.leases(data.draw, nodes))
        o = case.observed(data.draw, want.tenancy)
        removals, _ = k.diff(want.get(case.name), o).split()
        after = case.apply(o, removals)
        before_seen, after_seen = k.tenants_seen(o, want.tenancy), k.tenants_seen(after, want.tenancy)
        for node, tenants in after_seen.items():
            gained = (tenants - {QUARANTINE}) - before_seen.get(node, frozenset())
            assert not gained, f"{node}: the removals {removals.lines()} granted {sorted(gained)}"

    @PROPS
    @given(data=st.data())
    def test_merge_is_idempotent(self, case: KindCase, data: st.DataObject) -> None:
        w, k = World([case]), case.kind
        nodes = data.draw(w.inventories())
        want = w.desired(nodes, w.leases(data.draw, nodes))
        o = case.observed(data.draw, want.tenancy)
        p = k.diff(want.get(case.name), o)
        reads = [case.read_back(o, part) for part in (p.split()[0], p) if not part.empty]
        reads.append(k.as_observed(want.get(case.name)))  # a full read
        for r in reads:
            once = k.merge(o, r)
            assert k.merge(once, r) == once

    @PROPS
    @given(data=st.data())
    def test_applying_the_plan_converges(self, case: KindCase, data: st.DataObject) -> None:
        w, k = World([case]), case.kind
        nodes = data.draw(w.inventories())
        want = w.desired(nodes, w.leases(data.draw, nodes))
        d, o = want.get(case.name), case.observed(data.draw, want.tenancy)
        p = k.diff(d, o)
        whole = k.diff(d, case.apply(o, p))
        assert whole.empty, whole.lines()
        removals, additions = p.split()
        rest = k.diff(d, case.apply(case.apply(o, removals), additions))
        assert rest.empty, rest.lines()

    @PROPS
    @given(data=st.data())
    def test_no_intermediate_state_of_a_move_splits_a_node(self, case: KindCase, data: st.DataObject) -> None:
        check_moves([case], data)


class TestFabricKindContract(BaseTestFabricKind):
    pass


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_no_intermediate_state_of_a_move_splits_a_node_on_all_fabrics_in_any_order(data: st.DataObject) -> None:
    check_moves(CASES, data)


def check_moves(cases: Any, data: st.DataObject) -> None:
    """A move of one node from ``a`` to ``b`` (others keep their leases): through quarantine
    then join, and directly; each phase's fabrics applied in a drawn order."""
    w = World(cases)
    nodes = data.draw(w.inventories())
    leases = w.leases(data.draw, nodes)
    mover = data.draw(st.sampled_from(nodes))
    a, b = data.draw(st.sampled_from(MOVES))
    others = [x for x in leases if x.node != mover.name]
    old, new = [*others, *w.lease(data.draw, mover, a)], [*others, *w.lease(data.draw, mover, b)]
    before, after = w.desired(nodes, old), w.desired(nodes, new)
    held = w.desired(nodes, others)  # the quarantine phase: the node in quarantine
    start = as_observed(w.kinds, before)
    order = tuple(data.draw(st.permutations([k.name for k in w.kinds])))
    mid = w.run_phase(held, start, order, "quarantine")
    for where, view in (("quarantine", held), (f"old tenant {a}", before)):
        seen = tenants_seen(w.kinds, view, mid).get(mover.name, frozenset({QUARANTINE}))
        assert seen <= {QUARANTINE}, f"after the quarantine phase {mover.name} is seen (as {where}) in {sorted(seen)}"
    w.run_phase(after, mid, order, "join")
    # and a direct move, split into removals then additions, on the fabrics that record owners
    direct = World([c for c in cases if c.records_owner])
    if direct.kinds:
        there = tuple(n for n in order if n in direct.cases)
        direct.run_phase(direct.desired(nodes, new), as_observed(direct.kinds, direct.desired(nodes, old)), there, "direct")


@pytest.mark.xfail(strict=True, reason="NVLink's Fabric Manager keeps no tenant labels: NvlinkKind.tenants_seen credits "
                   "any active partition to the tenancy's owner, so a direct move shows the old partition as the new "
                   "tenant's; the engine always moves through quarantine (checked above), and the NVLink audit reports "
                   "a partition that should not be active")
def test_a_direct_move_is_observable_on_nvlink() -> None:
    nvlink = next(c for c in CASES if c.name == "nvlink")
    w = World([nvlink, next(c for c in CASES if c.name == "memory")])
    node = Node("n0", fabric_ports=gpu_ports(*(Gpu("n0", ModuleId(m)) for m in range(1, 9))))
    start = as_observed(w.kinds, w.desired((node,), [Lease("ta", "n0", T0, networks=("ta-n0",))]))
    w.assert_never_split(w.desired((node,), [Lease("tb", "n0", T0, networks=("tb-n0",))]), [start], "direct")
