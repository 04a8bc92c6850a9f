"""The DPU fabric's audit invariants (pure): role vs offering, tenant leftovers, hw-offload.

On a shared host (issue 33) a slot's logical port (``LogicalPort.slot``) belongs to that slot's
tenant: it is a leftover when the slot is not one of the host's, the host is not shared, or the
slot's tenant is another (quarantine included); flows are judged by the node they are counted for
(a slot's port: the slot)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from gpufabric.domain.fabric import InvariantSpec, Tenancy
from gpufabric.domain.findings import Violation
from gpufabric.domain.models import QUARANTINE
from gpufabric.domain.severity import Severity
from gpufabric.fabrics.dpu.entries.info import dpu_inventory
from gpufabric.fabrics.dpu.plan.profiles import DPU_LABELS, HW_OFFLOAD, TENANT_KEY, observed_role, offering_role
from gpufabric.fabrics.dpu.state import DpuState, LogicalPort

INVARIANTS = (
    InvariantSpec("DPU-ROLE-MISMATCH", Severity.HIGH.value, "a node's DPU role (labels, taint, OVS) matches its offering"),
    InvariantSpec(
        "DPU-TENANT-LEFTOVER",
        Severity.CRITICAL.value,
        "no tenant logical ports, OVS binding or flows remain on a DPU after its node left the tenant",
    ),
    InvariantSpec("DPU-HW-OFFLOAD-OFF", Severity.MEDIUM.value, "hw-offload is on wherever the DPU role needs it"),
)


def audit(tenancy: Tenancy, observed: DpuState) -> Iterator[Violation]:
    inventory = dpu_inventory(tenancy.nodes)
    for host, info in sorted(inventory.items()):
        want = offering_role(tenancy.offering(host))
        have = observed_role(observed, info)
        dpu_labelled = any(k in observed.labels_of(info.dpu_node) for k in DPU_LABELS)
        tainted = bool(observed.taints_of(host))
        if have != want or dpu_labelled != (want == "dpu-host") or tainted != (want == "dpu-host"):
            yield Violation(
                "DPU-ROLE-MISMATCH",
                Severity.HIGH,
                f"{host}: DPU role {have!r} (DPU labelled: {dpu_labelled}, host tainted: {tainted}), "
                f"offering wants {want!r}",
                fabric="dpu",
                device=info.dpu_node,
                node=host,
                resource=f"role:{want}",
            )
        owner = tenancy.owner(host)
        for p, want_tenant in sorted((x, port_owner(tenancy, x)) for x in observed.ports_of(host)):
            if p.tenant != want_tenant:
                yield _leftover(host, info.dpu_node, p.tenant, want_tenant, f"logical port {p.switch}/{p.name}")
        bound = observed.ovs_of(host).get(TENANT_KEY)
        if bound is not None and bound != owner:
            yield _leftover(host, info.dpu_node, bound, owner, f"OVS {TENANT_KEY}={bound}")
        ovs = observed.ovs_of(host)
        if want != "none" and owner != QUARANTINE and ovs.get(HW_OFFLOAD) != "true":
            yield Violation(
                "DPU-HW-OFFLOAD-OFF",
                Severity.MEDIUM,
                f"{host}: role {want!r} needs {HW_OFFLOAD}=true on {info.dpu_node}, "
                f"found {ovs.get(HW_OFFLOAD, 'unset')!r}",
                fabric="dpu",
                device=info.dpu_node,
                node=host,
                resource=HW_OFFLOAD,
            )
    known = set(inventory)
    for p in sorted(x for x in observed.ports if x.node not in known):
        yield _leftover(p.node, "", p.tenant, "unknown node", f"logical port {p.switch}/{p.name}")


def port_owner(tenancy: Tenancy, port: LogicalPort) -> str:
    """Whom ``port`` may belong to: its slot's tenant for a slot's port of a shared host whose own
    lease is live (quarantine when the slot is not one of that host's), else its host's."""
    if not port.slot:
        return tenancy.owner(port.node)
    live = tenancy.owner(port.node) != QUARANTINE and tenancy.shared(port.node)
    mine = any(s.name == port.slot for s in tenancy.slots_of(port.node))
    return tenancy.owner(port.slot) if live and mine else QUARANTINE


def _leftover(host: str, device: str, tenant: str, owner: str, what: str) -> Violation:
    return Violation(
        "DPU-TENANT-LEFTOVER",
        Severity.CRITICAL,
        f"{host}: {what} of tenant {tenant!r} remains; node belongs to {owner!r}",
        fabric="dpu",
        device=device,
        node=host,
        tenants=(tenant,),
        resource=what,
    )


def flow_leftovers(tenancy: Tenancy, flow_tenants: Iterable[tuple[str, str]]) -> Iterator[Violation]:
    """DPU-TENANT-LEFTOVER for datapath flows: ``(node, tenant)`` pairs that an offload report
    attributed to tenants (node: a slot for a flow of a slot's port), where the node no longer
    belongs to that tenant."""
    for node, tenant in sorted(set(flow_tenants)):
        owner = tenancy.owner(node)
        if tenant != owner:
            yield _leftover(node, "", tenant, owner, "datapath flows")
