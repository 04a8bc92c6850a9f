"""Property: for any observed partitions (as FM allows them), health and lease, applying the
plan under FM's own rules (the stand-in's activate/deactivate) succeeds change by change with
removals first, and the result has an empty diff and a clean audit."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import Lease, Node
from gpufabric.domain.values import ModuleId
from gpufabric.fabrics.nvlink.entries import Gpu, gpu_ports
from gpufabric.fabrics.nvlink.kind import NvlinkKind
from gpufabric.fabrics.nvlink.plan import NvlinkPlan
from gpufabric.fabrics.nvlink.readers.fmreturn import FmReturn
from gpufabric.fabrics.nvlink.segments import table
from gpufabric.fabrics.nvlink.state import GpuInfo, NodeFm, NvlinkState
from gpufabric.lab import fmpm_standin as standin

HGX = table("hgx-h100-8gpu")
KIND = NvlinkKind()
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _state(active: list[int]) -> dict[str, object]:
    state: dict[str, object] = {"partitions": {str(p.id): sorted(p.gpus) for p in HGX}, "active": [], "unsupported": []}
    for pid in active:
        standin.activate(state, pid)  # keeps only what FM would accept
    return state


@settings(max_examples=300, deadline=None)
@given(
    order=st.permutations([p.id for p in HGX]),
    n_active=st.integers(min_value=0, max_value=8),
    lease=st.one_of(st.none(), st.tuples(st.sampled_from(["alpha", "beta"]), st.sampled_from([None, 1, 2, 4, 8]))),
    sick=st.frozensets(st.integers(min_value=1, max_value=8), max_size=2),
)
def test_plan_applies_under_fm_rules_and_converges(
    order: list[int], n_active: int, lease: tuple[str, int | None] | None, sick: frozenset[int]
) -> None:
    state = _state(order[:n_active])
    gpus = tuple(GpuInfo(m, failed_ports=(1,) if m in sick else ()) for m in range(1, 9))
    node = Node("a", fabric_ports=gpu_ports(*(Gpu("a", ModuleId(m)) for m in range(1, 9))))
    t = Tenancy((node,), {"a": Lease(lease[0], "a", T0, terms=(("gpus", lease[1]),)) if lease else None}, {})

    def observed() -> NvlinkState:
        return NvlinkState({"a": NodeFm("a", HGX, frozenset(state["active"]), gpus)})  # type: ignore[arg-type]

    desired = KIND.desired(t)
    try:
        plan = KIND.diff(desired, observed())
    except ValidationError as e:  # only when no healthy partition of that size exists
        assert e.field == "gpus"
        k = desired.nodes["a"].gpus
        assert all(p.gpus & sick for p in HGX if p.size == k)
        return
    assert isinstance(plan, NvlinkPlan)
    removals, additions = plan.split()
    for c in removals.changes:
        assert standin.deactivate(state, c.partition) is FmReturn.SUCCESS
    joining = {g for c in additions.changes for g in c.gpus}
    assert not any(p.id in state["active"] and p.gpus & joining for p in HGX)  # type: ignore[operator]
    for c in additions.changes:
        assert standin.activate(state, c.partition) is FmReturn.SUCCESS
    assert KIND.diff(desired, observed()).empty
    assert list(KIND.audit(t, desired, observed())) == []
