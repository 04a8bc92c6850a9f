"""The fast paths of partitions.py (canonical partitions kept as they are, int-keyed counts)
give what the plain definitions give."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from gpufabric.domain.values import Guid, Membership, PKey
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember
from gpufabric.fabrics.infiniband.state.partitions import PortNeed, normalize_layout, port_needs

POOL = [Guid(0x0002C90330000000 | n) for n in range(1, 9)]
members = st.lists(st.builds(PartitionMember, st.sampled_from(POOL), st.sampled_from(Membership)), max_size=8)


@st.composite
def layouts(draw: st.DrawFn) -> PartitionLayout:
    keys = draw(st.lists(st.integers(1, 40), max_size=4, unique=True))
    parts = tuple(Partition(f"t{k}", PKey(k), tuple(draw(members)), draw(st.booleans())) for k in keys)
    return PartitionLayout(parts, tuple(draw(st.lists(st.sampled_from(POOL), max_size=2))), draw(st.booleans()))


def plain_normalize(layout: PartitionLayout) -> PartitionLayout:
    parts = []
    for p in sorted(layout.partitions, key=lambda p: p.pkey.value):
        best: dict[Guid, Membership] = {}
        for m in p.members:
            if best.get(m.guid) is not Membership.FULL:
                best[m.guid] = m.membership
        parts.append(Partition(p.name, p.pkey, tuple(PartitionMember(g, best[g]) for g in sorted(best)), p.ipoib))
    return PartitionLayout(tuple(parts), tuple(sorted(set(layout.default_full))), layout.default_limited_all)


@settings(max_examples=300, deadline=None)
@given(layouts())
def test_normalize_equals_the_plain_definition(layout: PartitionLayout) -> None:
    norm = normalize_layout(layout)
    assert norm == plain_normalize(layout)
    assert normalize_layout(norm) == norm  # the canonical fast path


@settings(max_examples=300, deadline=None)
@given(layouts(), st.dictionaries(st.sampled_from(POOL), st.integers(1, 128)))
def test_port_needs_equals_the_plain_definition(layout: PartitionLayout, capacity: dict[Guid, int]) -> None:
    count = Counter(g for p in layout.partitions for g in {m.guid for m in p.members})
    for g in layout.default_full:
        count.setdefault(g, 0)
    slot = 1 if layout.default_limited_all else 0
    want = [
        PortNeed(g, count[g] + (1 if g in layout.default_full else slot), capacity.get(g) or 64) for g in sorted(count)
    ]
    assert port_needs(layout, capacity) == want
