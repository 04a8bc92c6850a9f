"""The DPU kind on a shared host (issue 33), on a hand-built Tenancy: ``gpu-a01`` leased to infra in
``vm-host`` with slots A (GPUs 1-4, tenant a), B (5-6, b), C (7-8, c); each live slot's tenant gets
its own OVN logical port ``<slot>.bf0`` on the host's DPU, the host's lease keeps its own; a slot
move (B to quarantine, then to d) changes only B's port; ownership, audit and the offload report
count a slot's port and flows for the slot."""

from __future__ import annotations

from dataclasses import replace

from gpufabric.domain.fabric import Tenancy
from gpufabric.fabrics.dpu.audit.report import NodeOffload, metrics_text, offload_report
from gpufabric.fabrics.dpu.kind import DpuKind
from gpufabric.fabrics.dpu.plan import DpuPlan
from gpufabric.fabrics.dpu.plan.profiles import TENANT_KEY, port_mac
from gpufabric.fabrics.dpu.readers.offload import DpFlow
from gpufabric.fabrics.dpu.state import LogicalPort, OvsSetting

from .dpu_scenarios import HOST, OFFERINGS, OTHER, SA, SB, SC, slot_tenancy

tenancy = slot_tenancy

KIND = DpuKind()


def slot_port(slot: str, tenant: str) -> LogicalPort:
    return LogicalPort(f"{slot}.bf0", tenant, HOST, port_mac(slot, "bf0"), slot=slot)


def host_port(host: str, tenant: str) -> LogicalPort:
    return LogicalPort(f"{host}.pf0vf1", tenant, host, port_mac(host, "pf0vf1"), "pf0vf1")


def test_each_live_slot_gets_its_own_port_and_the_host_keeps_its_own() -> None:
    d = KIND.desired(tenancy())
    assert d.ports == {
        host_port(HOST, "infra"), host_port(OTHER, "a"),
        slot_port(SA, "a"), slot_port(SB, "b"), slot_port(SC, "c"),
    }  # fmt: skip
    assert {p.switch for p in d.ports if p.slot} == {"gf-a", "gf-b", "gf-c"}
    assert OvsSetting(HOST, TENANT_KEY, "infra") in d.ovs  # the DPU's OVS binding follows the host's lease
    assert len({p.mac for p in d.ports}) == len(d.ports)


def test_not_shared_or_host_in_quarantine_has_no_slot_ports() -> None:
    bare = KIND.desired(tenancy(host_offering="baremetal"))
    assert {p for p in bare.ports if p.slot} == set() and host_port(HOST, "infra") in bare.ports
    t = tenancy()
    q = KIND.desired(Tenancy(t.nodes, {**t.owners, HOST: None}, {}, OFFERINGS))
    assert q.ports_of(HOST) == []


def test_slot_to_quarantine_changes_only_that_slots_port() -> None:
    before = KIND.desired(tenancy())
    quarantine = KIND.desired(tenancy({"a": "a", "b": None, "c": "c"}))
    plan = KIND.diff(quarantine, KIND.as_observed(before))
    assert isinstance(plan, DpuPlan)
    assert plan.lines() == [f"- {slot_port(SB, 'b')}"]
    assert plan.objects() == {"ovn:gf-b"}
    joined = KIND.desired(tenancy({"a": "a", "b": "d", "c": "c"}))
    rejoin = KIND.diff(joined, KIND.as_observed(quarantine))
    assert isinstance(rejoin, DpuPlan)
    assert rejoin.lines() == [f"+ {slot_port(SB, 'd')}"]
    assert KIND.diff(joined, KIND.as_observed(joined)).empty


def test_tenants_seen_counts_a_slots_port_for_the_slot() -> None:
    t = tenancy()
    seen = KIND.tenants_seen(KIND.as_observed(KIND.desired(t)), t)
    assert seen[HOST] == {"infra"} and seen[OTHER] == {"a"}
    assert (seen[SA], seen[SB], seen[SC]) == ({"a"}, {"b"}, {"c"})


def test_audit_clean_then_a_stale_slot_port_is_a_leftover() -> None:
    t = tenancy()
    obs = KIND.as_observed(KIND.desired(t))
    assert list(KIND.audit(t, KIND.desired(t), obs)) == []
    moved = tenancy({"a": "a", "b": "d", "c": "c"})
    found = list(KIND.audit(moved, KIND.desired(moved), obs))  # B's old port of b still there
    assert [(v.invariant, v.node, v.tenants, v.resource) for v in found] == [
        ("DPU-TENANT-LEFTOVER", HOST, ("b",), f"logical port gf-b/{SB}.bf0")
    ]
    bare = tenancy(host_offering="baremetal")  # the host no longer shared: every slot port is a leftover
    assert sorted(v.tenants for v in KIND.audit(bare, KIND.desired(bare), obs)) == [("a",), ("b",), ("c",)]
    flows = replace(obs, flows=frozenset({(SB, "b"), (SC, "c"), (HOST, "infra")}))
    got = list(KIND.audit(moved, KIND.desired(moved), replace(flows, ports=KIND.desired(moved).ports)))
    assert [(v.node, v.tenants, v.resource) for v in got] == [(SB, ("b",), "datapath flows")]


def _flow(in_port: str, path: str = "datapath", nbytes: int = 100) -> DpFlow:
    return DpFlow(f"ufid:{in_port}-{path}-{nbytes}", in_port, (), 1, nbytes, path)


def test_offload_report_groups_flows_per_slot_and_tenant() -> None:
    ports = {p.name: p for p in [host_port(HOST, "infra"), slot_port(SA, "a"), slot_port(SB, "b")]}
    node = NodeOffload(
        HOST, "BlueField-2",
        (_flow("pf0vf1"), _flow("pf0vf2", "hw", 1000), _flow("pf0vf2", "hw", 10), _flow("pf0vf3"), _flow("pf0vf9")),
        (), {"pf0vf1": f"{HOST}.pf0vf1", "pf0vf2": f"{SA}.bf0", "pf0vf3": f"{SB}.bf0"},
    )  # fmt: skip
    owners = {HOST: "infra", SA: "a", SB: "b"}
    r = offload_report([node], ports, owners)
    rows = {(x["node"], x["slot"], x["tenant"]): x for x in r["rows"]}
    assert set(rows) == {(HOST, None, "infra"), (HOST, SA, "a"), (HOST, SB, "b"), (HOST, None, "-")}
    assert (rows[(HOST, SA, "a")]["hw_flows"], rows[(HOST, SA, "a")]["hw_bytes"]) == (2, 1010)
    assert rows[(HOST, SB, "b")]["datapath_flows"] == 1
    assert r["alerts"] == []  # a slot's flows are its tenant's, not foreign to the host's infra
    text = metrics_text(r)
    assert f'gpufabric_dpu_offload_flows{{node="{HOST}",slot="{SA}",tenant="a",path="hw"}} 2' in text
    assert f'gpufabric_dpu_offload_flows{{node="{HOST}",tenant="infra",path="datapath"}} 1' in text
    moved = offload_report([node], ports, {**owners, SB: "quarantine"})  # B in quarantine, its flows remain
    assert [(a["kind"], a.get("slot"), a["tenant"], a["flows"]) for a in moved["alerts"]] == [
        ("quarantined_node_flows", SB, "b", 1)
    ]
