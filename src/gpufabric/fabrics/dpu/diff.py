"""The DPU fabric's pure diff, merge of read-backs, and ownership view."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import QUARANTINE
from gpufabric.fabrics.dpu.info import dpu_inventory
from gpufabric.fabrics.dpu.model import DpuChange, DpuPlan, DpuState, Item, OvsSetting, item_object
from gpufabric.fabrics.dpu.profiles import REMOVABLE_OVS_KEYS


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
    """host -> tenants its DPU holds resources of (logical ports, the OVS tenant binding)."""
    hosts = dpu_inventory(tenancy.nodes)
    seen: dict[str, set[str]] = {h: set() for h in hosts}
    for p in observed.ports:
        seen.setdefault(p.node, set()).add(p.tenant)
    for s in observed.ovs:
        if s.key == "external_ids:gpufabric-tenant":
            seen.setdefault(s.node, set()).add(s.value)
    return {h: frozenset(t) if t else frozenset({QUARANTINE}) for h, t in seen.items()}
