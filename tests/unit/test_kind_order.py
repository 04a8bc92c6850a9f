"""The kinds' order (columns, phases, listings) is each kind's own ``order``, then its name: the
built-in Ethernet and InfiniBand kinds first, every other kind after them by name, and a kind
that sets a lower order before them. No list of kind names in the core decides it."""

from __future__ import annotations

from gpufabric.store.registry import Registry

from support.memfabric.kind import MemoryKind


class EarlyKind(MemoryKind):
    name = "aaa-early"
    order = 5


class LateKind(MemoryKind):
    name = "zzz-late"


def test_the_registered_kinds_come_in_their_own_order() -> None:
    reg = Registry.from_entry_points(drivers=False)
    assert [k.name for k in reg.ordered_kinds()] == ["ethernet", "infiniband", "dpu", "nvlink"]
    reg.register_kind(LateKind())
    reg.register_kind(EarlyKind())
    assert [k.name for k in reg.ordered_kinds()] == ["aaa-early", "ethernet", "infiniband", "dpu", "nvlink", "zzz-late"]
