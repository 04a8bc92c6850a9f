"""DPU case: some nodes have a BlueField (one or two tenant-facing representors, with or
without gateway facts); leases use the built-in offerings plus a ``full``-role one; observed
states hold any subset of what some tenancy of those nodes would configure (one value per
OVS key and label key, ``hw-offload`` possibly ``false``); the read-back is the objects the
plan touched (``covered``), as the backend returns it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from gpufabric.domain.fabric import FabricPlan, Tenancy
from gpufabric.domain.models import BUILTIN_OFFERINGS, QUARANTINE, Offering
from gpufabric.fabrics.dpu.entries import Dpu, DpuMode, dpu_ports
from gpufabric.fabrics.dpu.entries.info import dpu_inventory
from gpufabric.fabrics.dpu.kind import DpuKind
from gpufabric.fabrics.dpu.plan import DpuPlan
from gpufabric.fabrics.dpu.plan.profiles import HW_OFFLOAD, node_items, offering_role
from gpufabric.fabrics.dpu.state import DpuState, Item, Label, OvsSetting, item_object

from contract.kinds import TENANTS, KindCase

OFFERINGS = (*BUILTIN_OFFERINGS, Offering("k8s-full", "plain Kubernetes", (("dpu_role", "full"),)))


def node(draw: st.DrawFn, name: str, i: int) -> Mapping[str, Any]:
    if not draw(st.booleans() | st.just(True)):  # mostly with a DPU
        return {}
    details = {"pf": "ens1f0", "representors": draw(st.sampled_from(["pf0vf1", "pf0vf1,pf0vf2"])), "nic_model": "BlueField-2"}
    if draw(st.booleans()):
        details |= {"gw_interface": "p0", "gw_nexthop": f"192.0.2.{i + 1}"}
    return {"fabric_ports": dpu_ports(Dpu(name, "bf0", DpuMode.DPU, tuple(sorted(details.items()))))}


def observed(draw: st.DrawFn, tenancy: Tenancy) -> DpuState:
    by_key: dict[tuple[str, str, str], Item] = {}
    for host, info in dpu_inventory(tenancy.nodes).items():
        for _ in range(draw(st.integers(0, 2))):  # what up to two past tenancies left behind
            tenant = draw(st.sampled_from((QUARANTINE, *TENANTS)))
            role = offering_role(draw(st.sampled_from(OFFERINGS)))
            for item in node_items(info, tenant, role):
                if draw(st.booleans()) or draw(st.booleans()):
                    if isinstance(item, OvsSetting) and item.key == HW_OFFLOAD and draw(st.booleans()):
                        item = OvsSetting(item.node, item.key, "false")
                    key = _key(item)
                    by_key[key] = item  # one value per OVS key / label key, as the real objects hold
        if draw(st.booleans()):
            by_key[("ovs", host, HW_OFFLOAD)] = OvsSetting(host, HW_OFFLOAD, draw(st.sampled_from(["true", "false"])))
    return DpuState.of(by_key.values())


def _key(item: Item) -> tuple[str, str, str]:
    if isinstance(item, OvsSetting):
        return ("ovs", item.node, item.key)
    if isinstance(item, Label):
        return ("label", item.k8s_node, item.key)
    return (type(item).__name__, item_object(item), str(item))


def read_back(state: DpuState, plan: FabricPlan) -> DpuState:
    assert isinstance(plan, DpuPlan)
    items = {_key(i): i for i in state.items()}
    for i in plan.removed():
        assert items.pop(_key(i), None) == i, f"removes {i}, which is not there"
    for i in plan.added():
        items[_key(i)] = i  # a label or OVS key takes its new value
    covered = plan.objects()
    return DpuState.of([i for i in items.values() if item_object(i) in covered], covered)


CASE = KindCase(DpuKind(), observed, read_back, node=node, offerings=OFFERINGS)
