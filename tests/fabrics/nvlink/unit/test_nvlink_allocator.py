"""The partition allocator: exact size, never overlapping an active partition or an unavailable
GPU, keeps larger partitions free; refusals name ``gpus`` and say what is possible. Checked over
every request size and every occupancy pattern of the HGX 8-GPU table (hypothesis draws the
unavailable GPUs)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufabric.domain.errors import ValidationError
from gpufabric.fabrics.nvlink.plan import allocate, assign, free_partitions, keep_free_score
from gpufabric.fabrics.nvlink.segments import Partition, table
from gpufabric.fabrics.nvlink.state import GpuInfo, NodeFm, NodeWant

HGX = table("hgx-h100-8gpu")


def _patterns(parts: Sequence[Partition]) -> list[tuple[Partition, ...]]:
    """Every set of pairwise-disjoint partitions (what can be active at once)."""
    out: list[tuple[Partition, ...]] = []

    def rec(i: int, chosen: tuple[Partition, ...], used: frozenset[int]) -> None:
        if i == len(parts):
            out.append(chosen)
            return
        rec(i + 1, chosen, used)
        if not parts[i].gpus & used:
            rec(i + 1, (*chosen, parts[i]), used | parts[i].gpus)

    rec(0, (), frozenset())
    return out


PATTERNS = _patterns(HGX)


def test_patterns_enumerated_once() -> None:
    assert len(set(PATTERNS)) == len(PATTERNS)
    assert () in PATTERNS and (HGX[0],) in PATTERNS and len(PATTERNS) == 677


@settings(max_examples=400, deadline=None)
@given(
    pattern=st.sampled_from(PATTERNS),
    k=st.integers(min_value=0, max_value=9),
    unavailable=st.frozensets(st.integers(min_value=1, max_value=8), max_size=3),
)
def test_allocation_properties(pattern: tuple[Partition, ...], k: int, unavailable: frozenset[int]) -> None:
    busy = frozenset().union(*(p.gpus for p in pattern))
    free = free_partitions(HGX, busy, unavailable)
    candidates = [p for p in free if p.size == k]
    if not candidates:
        with pytest.raises(ValidationError) as e:
            allocate(HGX, k, busy=busy, unavailable=unavailable)
        assert e.value.field == "gpus" and e.value.value == k
        for p in free:
            assert str(p) in e.value.allowed
        return
    got = allocate(HGX, k, busy=busy, unavailable=unavailable)
    assert got in HGX and got.size == k
    assert not got.gpus & busy and not got.gpus & unavailable
    best = max(keep_free_score(HGX, free, c) for c in candidates)
    assert keep_free_score(HGX, free, got) == best
    assert got.id == min(c.id for c in candidates if keep_free_score(HGX, free, c) == best)


@pytest.mark.parametrize("k", range(0, 10))
def test_every_size_and_every_occupancy_pattern(k: int) -> None:
    for pattern in PATTERNS:  # all 677 sets of disjoint active partitions
        busy = frozenset().union(*(p.gpus for p in pattern))
        free = free_partitions(HGX, busy)
        candidates = [p for p in free if p.size == k]
        if not candidates:
            with pytest.raises(ValidationError):
                allocate(HGX, k, busy=busy)
            continue
        got = allocate(HGX, k, busy=busy)
        assert got.size == k and not got.gpus & busy
        assert keep_free_score(HGX, free, got) == max(keep_free_score(HGX, free, c) for c in candidates)


@pytest.mark.parametrize(
    ("busy_ids", "k", "want"),
    [
        ((), 8, 0),
        ((), 4, 1),
        ((), 2, 3),
        ((), 1, 7),
        ((3,), 1, 8),  # GPUs 1,3 taken: GPU 2 keeps the 5-8 half and both pairs there free
        ((7,), 2, 4),  # GPU 1 taken: pair 2,4 keeps the 5-8 half free
        ((1,), 2, 5),
        ((5,), 4, 1),
        ((4, 3), 1, 11),  # the 1-4 half is full: every single GPU of 5-8 ties, lowest id
    ],
    ids=["whole", "half", "pair", "single", "single-next-to-pair", "pair-next-to-single", "pair-other-half",
         "half-other", "single-other-half"],
)
def test_examples(busy_ids: tuple[int, ...], k: int, want: int) -> None:
    busy = frozenset().union(*(HGX[i].gpus for i in busy_ids))
    assert allocate(HGX, k, busy=busy).id == want


@pytest.mark.parametrize(
    ("k", "reason"),
    [(3, "no partition of 3 GPUs exists"), (8, "overlaps"), (0, "not a positive count")],
    ids=["no-such-size", "overlap", "zero"],
)
def test_refusal_names_gpus_and_lists_what_is_possible(k: int, reason: str) -> None:
    with pytest.raises(ValidationError) as e:
        allocate(HGX, k, busy=HGX[3].gpus)
    assert e.value.field == "gpus"
    assert reason in str(e.value)
    assert "1 or 2 or 4 GPUs" in e.value.allowed and "2 [5,6,7,8]" in e.value.allowed


def test_prefer_keeps_the_active_partition() -> None:
    assert allocate(HGX, 2, prefer={6}) == HGX[6]
    # no longer fits: pick afresh; 5,7 keeps the 1-4 half free (1,3 or 2,4 would not)
    assert allocate(HGX, 2, prefer={6}, unavailable={8}) == HGX[5]
    assert allocate(HGX, 2, unsupported={3}).id == 4


def _fm(active: set[int], unhealthy: set[int] = frozenset()) -> NodeFm:  # type: ignore[assignment]
    gpus = tuple(GpuInfo(m, state="Completed" if m not in unhealthy else "In Progress", status="Success") for m in range(1, 9))
    return NodeFm("n1", HGX, frozenset(active), gpus)


def test_assign_uses_observed_state_inventory_and_health() -> None:
    want = NodeWant("n1", "alpha", 2, HGX, frozenset(range(1, 9)))
    assert assign(want, None) == HGX[3]
    assert assign(want, _fm({5})) == HGX[5]  # kept
    assert assign(want, _fm({5}, {7})) == HGX[6]  # the kept one became unhealthy: 6,8 keeps 1-4 free
    assert assign(NodeWant("n1", "alpha", 2, HGX, frozenset({2, 4, 5})), None) == HGX[4]  # GPUs not in the inventory
    assert assign(NodeWant("n1", "quarantine", 0, HGX), _fm({0})) is None
    with pytest.raises(ValidationError) as e:
        assign(NodeWant("n1", "alpha", 8, HGX), _fm(set(), {3}))
    assert e.value.field == "gpus" and "node n1" in str(e.value)
