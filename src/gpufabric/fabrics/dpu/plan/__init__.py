"""The DPU fabric's plan (pure): its changes (:class:`DpuPlan`), the diff of desired and observed
state, the merge of read-backs and the ownership view. The roles and desired slice are
:mod:`.profiles`; the SR-IOV node policy of a DPU host is :mod:`.sriov`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

from gpufabric.domain.fabric import FabricPlan, Tenancy
from gpufabric.domain.models import QUARANTINE
from gpufabric.fabrics.dpu.entries.info import dpu_inventory
from gpufabric.fabrics.dpu.plan.profiles import REMOVABLE_OVS_KEYS
from gpufabric.fabrics.dpu.state import DpuState, Item, OvsSetting, item_object


@dataclass(frozen=True)
class DpuChange:
    op: Literal["add", "remove"]
    item: Item

    def line(self) -> str:
        return f"{'+' if self.op == 'add' else '-'} {self.item}"

    def sort_key(self) -> tuple[str, str, str]:
        return ("1" if self.op == "add" else "0", type(self.item).__name__, str(self.item))


@dataclass(frozen=True)
class DpuPlan(FabricPlan):
    fabric: ClassVar[str] = "dpu"
    changes: tuple[DpuChange, ...] = field(default_factory=tuple)

    @property
    def empty(self) -> bool:
        return not self.changes

    def lines(self) -> list[str]:
        return [c.line() for c in self.changes]

    def to_dict(self) -> Any:
        return [{"op": c.op, "kind": type(c.item).__name__.lower(), **vars(c.item)} for c in self.changes]

    def split(self) -> tuple[DpuPlan, DpuPlan]:
        return (
            DpuPlan(tuple(c for c in self.changes if c.op == "remove")),
            DpuPlan(tuple(c for c in self.changes if c.op == "add")),
        )

    def removed(self) -> list[Item]:
        return [c.item for c in self.changes if c.op == "remove"]

    def added(self) -> list[Item]:
        return [c.item for c in self.changes if c.op == "add"]

    def objects(self) -> frozenset[str]:
        return frozenset(item_object(c.item) for c in self.changes)


def _removable(item: Item) -> bool:
    return not isinstance(item, OvsSetting) or item.key in REMOVABLE_OVS_KEYS


def diff(desired: DpuState, observed: DpuState) -> DpuPlan:
    """Changes turning ``observed`` into ``desired``: removals (sorted) then additions.

    A value change is a removal of the old item and an addition of the new one, so the
    removal half of the plan alone takes away the old tenant's binding. ``hw-offload`` is set
    where wanted, never removed."""
    want, have = desired.items(), observed.items()
    removes = [DpuChange("remove", i) for i in have - want if _removable(i)]
    ovs_set = {(s.node, s.key): s for s in observed.ovs}
    adds = []
    for i in want - have:
        if isinstance(i, OvsSetting):
            old = ovs_set.get((i.node, i.key))
            if old is not None and not _removable(old) and old.value == i.value:
                continue
        adds.append(DpuChange("add", i))
    return DpuPlan(tuple(sorted(removes + adds, key=DpuChange.sort_key)))


def merge(observed: DpuState, read_back: DpuState) -> DpuState:
    if read_back.covered is None:
        return read_back
    covered = read_back.covered
    kept = [i for i in observed.items() if item_object(i) not in covered]
    return replace(DpuState.of([*kept, *read_back.items()], observed.covered), flows=observed.flows)


def tenants_seen(observed: DpuState, tenancy: Tenancy) -> Mapping[str, frozenset[str]]:
    """host -> tenants its DPU holds resources of (logical ports, the OVS tenant binding); a slot's
    logical port (issue 33) is counted for its slot."""
    hosts = dpu_inventory(tenancy.nodes)
    seen: dict[str, set[str]] = {h: set() for h in hosts}
    for p in observed.ports:
        seen.setdefault(p.unit, set()).add(p.tenant)
    for s in observed.ovs:
        if s.key == "external_ids:gpufabric-tenant":
            seen.setdefault(s.node, set()).add(s.value)
    return {h: frozenset(t) if t else frozenset({QUARANTINE}) for h, t in seen.items()}
