"""DPU roles per offering, the desired slice, diff/split (removals first), merge of
read-backs, ownership and the audit invariants."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.models import QUARANTINE, Node, Offering
from gpufabric.fabrics.dpu.entries import DpuMode
from gpufabric.fabrics.dpu.kind import DpuKind
from gpufabric.fabrics.dpu.plan import DpuPlan
from gpufabric.fabrics.dpu.plan.profiles import HW_OFFLOAD, TENANT_KEY, offering_role, port_mac
from gpufabric.fabrics.dpu.state import DpuState, Label, LogicalPort, OvsSetting, Taint

from .dpu_scenarios import OFFERINGS, dpu_node, tenancy

KIND = DpuKind()
A, B = dpu_node("gpu-a01", gw_interface="p0", gw_nexthop="192.0.2.1"), dpu_node("gpu-a02")


@pytest.mark.parametrize(
    ("offering", "role"),
    [("openshift", "dpu-host"), ("baremetal", "none"), ("openstack", "none"), ("k8s-full", "full"), (None, "none")],
    ids=["openshift", "baremetal", "openstack", "override-full", "quarantine"],
)
def test_offering_roles(offering: str | None, role: str) -> None:
    assert offering_role(OFFERINGS[offering] if offering else None) == role


def test_bad_role_override_is_refused() -> None:
    with pytest.raises(ValidationError, match="dpu-host or full or none"):
        offering_role(Offering("x", settings=(("dpu_mode", DpuMode.FULL.value), ("dpu_role", "half"))))


def test_openshift_slice() -> None:
    d = KIND.desired(tenancy([A], {"gpu-a01": ("acme", "openshift")}))
    assert d.labels == {
        Label("gpu-a01", "k8s.ovn.org/dpu-host", ""),
        Label("gpu-a01", "network.operator.openshift.io/dpu-host", ""),
        Label("gpu-a01-bf0", "k8s.ovn.org/dpu", ""),
        Label("gpu-a01-bf0", "network.operator.openshift.io/dpu", ""),
    }
    assert d.taints == {Taint("gpu-a01", "k8s.ovn.org/dpu-host", "", "NoSchedule")}
    assert d.ovs_of("gpu-a01") == {
        HW_OFFLOAD: "true",
        "external_ids:host-k8s-nodename": "gpu-a01",
        "external_ids:ovn-gw-interface": "p0",
        "external_ids:ovn-gw-nexthop": "192.0.2.1",
        TENANT_KEY: "acme",
        "external_ids:gpufabric-role": "dpu",
    }
    assert d.ports == {LogicalPort("gpu-a01.pf0vf1", "acme", "gpu-a01", port_mac("gpu-a01", "pf0vf1"), "pf0vf1")}


def test_baremetal_slice_has_ports_and_binding_but_no_role() -> None:
    d = KIND.desired(tenancy([A], {"gpu-a01": ("acme", "baremetal")}))
    assert not d.labels and not d.taints
    assert d.ovs_of("gpu-a01") == {TENANT_KEY: "acme"}
    assert {p.tenant for p in d.ports} == {"acme"}


def test_quarantine_slice_is_empty() -> None:
    assert KIND.desired(tenancy([A], {"gpu-a01": None})).items() == frozenset()


def test_port_macs_are_stable_local_unicast_and_distinct() -> None:
    m1, m2 = port_mac("gpu-a01", "pf0vf1"), port_mac("gpu-a02", "pf0vf1")
    assert m1 == port_mac("gpu-a01", "pf0vf1") and m1 != m2
    assert int(m1[:2], 16) & 0b11 == 0b10


def test_move_out_of_openshift_split_removes_everything_first() -> None:
    before = KIND.desired(tenancy([A], {"gpu-a01": ("acme", "openshift")}))
    after = KIND.desired(tenancy([A], {"gpu-a01": None}))
    plan = KIND.diff(after, before)
    assert isinstance(plan, DpuPlan)
    removals, additions = plan.split()
    assert additions.empty
    removed = set(removals.removed())
    assert removed == before.items() - {OvsSetting("gpu-a01", HW_OFFLOAD, "true")}  # hw-offload is sticky
    assert all(line.startswith("- ") for line in removals.lines())


def test_tenant_change_removes_old_binding_before_adding_new() -> None:
    t_a = KIND.desired(tenancy([A], {"gpu-a01": ("acme", "openshift")}))
    t_b = KIND.desired(tenancy([A], {"gpu-a01": ("beta", "openshift")}))
    removals, additions = KIND.diff(t_b, t_a).split()
    assert isinstance(removals, DpuPlan) and isinstance(additions, DpuPlan)
    assert {str(i) for i in removals.removed()} == {
        "ovs gpu-a01 external_ids:gpufabric-tenant=acme", f"lsp gf-acme/gpu-a01.pf0vf1 node=gpu-a01 mac={port_mac('gpu-a01', 'pf0vf1')}"
    }
    assert {str(i) for i in additions.added()} == {
        "ovs gpu-a01 external_ids:gpufabric-tenant=beta", f"lsp gf-beta/gpu-a01.pf0vf1 node=gpu-a01 mac={port_mac('gpu-a01', 'pf0vf1')}"
    }
    # applying removals alone leaves the node holding nothing of either tenant
    mid = KIND.merge(t_a, DpuState.of(t_a.items() - set(removals.removed()), removals.objects()))
    assert KIND.tenants_seen(mid, tenancy([A], {"gpu-a01": None})) == {"gpu-a01": frozenset({QUARANTINE})}


def test_diff_of_desired_against_itself_is_empty_and_hw_offload_not_reset() -> None:
    d = KIND.desired(tenancy([A, B], {"gpu-a01": ("acme", "openshift"), "gpu-a02": ("acme", "k8s-full")}))
    assert KIND.diff(d, KIND.as_observed(d)).empty
    observed_with_offload_off = DpuState.of(
        (d.items() - {OvsSetting("gpu-a01", HW_OFFLOAD, "true")}) | {OvsSetting("gpu-a01", HW_OFFLOAD, "false")}
    )
    plan = KIND.diff(d, observed_with_offload_off)
    assert plan.lines() == ["+ ovs gpu-a01 other_config:hw-offload=true"]


def test_plan_dict_and_str() -> None:
    d = KIND.desired(tenancy([B], {"gpu-a02": ("acme", "openshift")}))
    plan = KIND.diff(d, KIND.empty_state())
    assert len(plan) == len(d.items())
    assert {c["kind"] for c in plan.to_dict()} == {"label", "taint", "ovssetting", "logicalport"}
    assert str(DpuPlan()) == "no changes"


def test_merge_replaces_only_covered_objects() -> None:
    full = KIND.desired(tenancy([A, B], {"gpu-a01": ("acme", "openshift"), "gpu-a02": ("beta", "openshift")}))
    read_back = DpuState.of([OvsSetting("gpu-a01", TENANT_KEY, "x")], frozenset({"ovs:gpu-a01"}))
    merged = KIND.merge(full, read_back)
    assert merged.ovs_of("gpu-a01") == {TENANT_KEY: "x"}
    assert merged.ovs_of("gpu-a02") == full.ovs_of("gpu-a02")
    assert merged.labels == full.labels and merged.ports == full.ports


def test_tenants_seen_flags_a_split_node() -> None:
    t = tenancy([A], {"gpu-a01": ("beta", "openshift")})
    stale = DpuState.of([LogicalPort("gpu-a01.pf0vf1", "acme", "gpu-a01", "0a:00:00:00:00:01"),
                         OvsSetting("gpu-a01", TENANT_KEY, "beta")])
    assert KIND.tenants_seen(stale, t) == {"gpu-a01": frozenset({"acme", "beta"})}


def _ids(violations: object) -> list[tuple[str, str]]:
    return sorted((v.invariant, v.node) for v in violations)  # type: ignore[attr-defined]


def test_audit_clean_when_observed_is_desired() -> None:
    t = tenancy([A, B], {"gpu-a01": ("acme", "openshift"), "gpu-a02": None})
    d = KIND.desired(t)
    assert list(KIND.audit(t, d, d)) == []


def test_audit_role_mismatch_leftover_and_offload_off() -> None:
    t = tenancy([A, B], {"gpu-a01": ("acme", "openshift"), "gpu-a02": None})
    d = KIND.desired(t)
    observed = DpuState.of(
        (d.items() - {OvsSetting("gpu-a01", HW_OFFLOAD, "true"), Label("gpu-a01-bf0", "k8s.ovn.org/dpu", ""),
                      Label("gpu-a01-bf0", "network.operator.openshift.io/dpu", "")})
        | {LogicalPort("gpu-a02.pf0vf1", "acme", "gpu-a02", "0a:00:00:00:00:02"),
           Label("gpu-a02", "k8s.ovn.org/dpu-host", ""), OvsSetting("gpu-a02", TENANT_KEY, "acme")}
    )
    got = _ids(KIND.audit(t, d, observed))
    assert got == [
        ("DPU-HW-OFFLOAD-OFF", "gpu-a01"),
        ("DPU-ROLE-MISMATCH", "gpu-a01"),
        ("DPU-ROLE-MISMATCH", "gpu-a02"),
        ("DPU-TENANT-LEFTOVER", "gpu-a02"),
        ("DPU-TENANT-LEFTOVER", "gpu-a02"),
    ]
    assert {i.id for i in KIND.invariants()} == {"DPU-ROLE-MISMATCH", "DPU-TENANT-LEFTOVER", "DPU-HW-OFFLOAD-OFF"}


def test_flow_leftovers() -> None:
    from gpufabric.fabrics.dpu.audit.checks import flow_leftovers

    t = tenancy([A, B], {"gpu-a01": ("acme", "openshift"), "gpu-a02": None})
    got = list(flow_leftovers(t, [("gpu-a01", "acme"), ("gpu-a02", "acme")]))
    assert [(v.invariant, v.node, v.tenants) for v in got] == [("DPU-TENANT-LEFTOVER", "gpu-a02", ("acme",))]


def test_audit_reports_flows_the_observed_state_attributes_to_a_former_tenant() -> None:
    """The audit runs flow_leftovers on what observe read (DpuState.flows); merge keeps them."""
    t = tenancy([A, B], {"gpu-a01": ("acme", "openshift"), "gpu-a02": None})
    d = KIND.desired(t)
    observed = replace(d, flows=frozenset({("gpu-a01", "acme"), ("gpu-a02", "acme")}))
    got = [(v.invariant, v.node, v.resource) for v in KIND.audit(t, d, observed)]
    assert got == [("DPU-TENANT-LEFTOVER", "gpu-a02", "datapath flows")]
    partial = DpuState.of([OvsSetting("gpu-a01", TENANT_KEY, "acme")], frozenset({"ovs:gpu-a01"}))
    assert KIND.merge(observed, partial).flows == observed.flows


def test_summary_and_node_view_show_the_role_in_the_lease_offering() -> None:
    t = tenancy([A, B], {"gpu-a01": ("acme", "openshift"), "gpu-a02": None})
    assert KIND.summary(A, t) == "bf0 dpu-host" and KIND.summary(B, t) == "bf0 none"
    assert KIND.summary(A) == "bf0 dpu"  # who holds it unknown: the DPU's inventory mode
    assert KIND.node_view(A, t) == {"dpus": [{"name": "bf0", "mode": "dpu", "role": "dpu-host", "dpu_node": "gpu-a01-bf0",
                                              "nic_model": "BlueField-2", "pf": "ens1f0"}]}  # fmt: skip
    assert KIND.node_view(B)["dpus"][0]["role"] is None
    assert KIND.summary(Node("gpu-a03"), t) == "" and KIND.node_view(Node("gpu-a03"), t) == {"dpus": []}
