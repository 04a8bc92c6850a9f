"""Offering profiles -> each node's DPU role, and the fabric's desired slice (pure).

Roles (``Offering.settings`` key ``dpu_role`` overrides; otherwise its ``dpu_mode`` setting,
:data:`~gpufabric.fabrics.dpu.entries.MODE_SETTING`: ``dpu-host``/``dpu`` -> ``dpu-host``,
``full`` or unset -> ``none``):

* ``dpu-host``: OVN-Kubernetes split across host and DPU (OpenShift with BlueField). The host's
  Kubernetes node gets ``k8s.ovn.org/dpu-host=`` and ``network.operator.openshift.io/dpu-host=``
  and the taint ``k8s.ovn.org/dpu-host=:NoSchedule`` (pods without a VF resource stay off it; the
  SR-IOV/DPU pods tolerate it); the DPU's node gets ``k8s.ovn.org/dpu=`` and
  ``network.operator.openshift.io/dpu=``; the DPU's OVS gets ``other_config:hw-offload=true``,
  ``external_ids:host-k8s-nodename=<host>``, ``ovn-gw-interface``/``ovn-gw-nexthop`` (when known).
* ``full``: OVN-Kubernetes runs fully on the host; the DPU is an offloading NIC
  (``hw-offload=true``), no DPU labels or taints.
* ``none``: no OVN-Kubernetes (bare metal, OpenStack).

Every leased node with a DPU also gets ``external_ids:gpufabric-tenant`` and ``gpufabric-role``
on its DPU's OVS and one OVN logical port per tenant-facing VF representor on the tenant's
logical switch ``gf-<tenant>``. Quarantine removes all of that; ``hw-offload`` is left as it is
(changing it needs an ``ovs-vswitchd`` restart on real hardware) and never removed by a plan.

A shared host (issue 33, ``tenancy.shared(host)``) whose DPU is in use: the host's own lease keeps
all of the above, and each live slot's tenant also gets one logical port of its own on the host's
DPU (:func:`slot_ports`: ``<slot>.<dpu>`` on ``gf-<slot tenant>``, ``external_ids:gpufabric-slot``),
the VM's port; a slot in quarantine has none. A slot move therefore changes only that slot's port.
"""

from __future__ import annotations

import hashlib
from typing import Final

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import QUARANTINE, Offering
from gpufabric.fabrics.dpu.entries import MODE_SETTING, DpuMode
from gpufabric.fabrics.dpu.entries.info import DpuInfo, dpu_inventory
from gpufabric.fabrics.dpu.state import DpuState, Item, Label, LogicalPort, OvsSetting, Taint

ROLES: Final = ("dpu-host", "full", "none")
HOST_LABELS: Final = ("k8s.ovn.org/dpu-host", "network.operator.openshift.io/dpu-host")
DPU_LABELS: Final = ("k8s.ovn.org/dpu", "network.operator.openshift.io/dpu")
MANAGED_LABELS: Final = frozenset(HOST_LABELS + DPU_LABELS)
DPU_HOST_TAINT: Final = Taint("", "k8s.ovn.org/dpu-host", "", "NoSchedule")
MANAGED_TAINT_KEYS: Final = frozenset({DPU_HOST_TAINT.key})

HW_OFFLOAD: Final = "other_config:hw-offload"
HOST_NODENAME: Final = "external_ids:host-k8s-nodename"
GW_INTERFACE: Final = "external_ids:ovn-gw-interface"
GW_NEXTHOP: Final = "external_ids:ovn-gw-nexthop"
TENANT_KEY: Final = "external_ids:gpufabric-tenant"
ROLE_KEY: Final = "external_ids:gpufabric-role"
REMOVABLE_OVS_KEYS: Final = frozenset({HOST_NODENAME, GW_INTERFACE, GW_NEXTHOP, TENANT_KEY, ROLE_KEY})
OBSERVED_OVS_KEYS: Final = REMOVABLE_OVS_KEYS | {HW_OFFLOAD}
"""What the backend reads; ``hw-offload`` is read (audit) but never removed by a plan."""


def offering_role(offering: Offering | None) -> str:
    """The host's OVN-Kubernetes role in ``offering`` (None: quarantine -> ``none``)."""
    if offering is None:
        return "none"
    override = dict(offering.settings).get("dpu_role")
    if override is not None:
        if override not in ROLES:
            raise ValidationError(f"offerings[{offering.name}].settings.dpu_role", override, " or ".join(ROLES))
        return override
    return "dpu-host" if offering_mode(offering) in (DpuMode.DPU_HOST, DpuMode.DPU) else "none"


def offering_mode(offering: Offering) -> DpuMode:
    """``offering``'s OVN-Kubernetes mode, its :data:`MODE_SETTING` (unset: ``full``); a
    ValidationError naming the setting for a value not a mode."""
    raw = offering.setting(MODE_SETTING)
    try:
        return DpuMode.FULL if raw is None else DpuMode(raw)
    except ValueError:
        allowed = " or ".join(m.value for m in DpuMode)
        raise ValidationError(f"offerings[{offering.name}].settings.{MODE_SETTING}", raw, allowed) from None


def dpu_side_role(host_role: str) -> str:
    """The DPU's own ovnkube-node mode for a host role (``dpu`` only for a ``dpu-host`` host)."""
    return "dpu" if host_role == "dpu-host" else host_role


def port_mac(node: str, representor: str) -> str:
    """A stable locally administered unicast MAC for a logical port (0a:xx:xx:xx:xx:xx)."""
    digest = hashlib.sha256(f"{node}/{representor}".encode()).digest()
    return "0a:" + ":".join(f"{b:02x}" for b in digest[:5])


def port_name(node: str, representor: str) -> str:
    return f"{node}.{representor}"


def node_items(info: DpuInfo, tenant: str, role: str) -> list[Item]:
    """Everything ``info``'s host and DPU should carry for ``tenant`` (QUARANTINE: nothing)."""
    if tenant == QUARANTINE:
        return []
    out: list[Item] = [OvsSetting(info.host, TENANT_KEY, tenant)]
    if role != "none":
        out += [OvsSetting(info.host, HW_OFFLOAD, "true"), OvsSetting(info.host, ROLE_KEY, dpu_side_role(role))]
    if role == "dpu-host":
        out += [Label(info.host, k, "") for k in HOST_LABELS]
        out += [Label(info.dpu_node, k, "") for k in DPU_LABELS]
        out.append(Taint(info.host, DPU_HOST_TAINT.key, DPU_HOST_TAINT.value, DPU_HOST_TAINT.effect))
        out.append(OvsSetting(info.host, HOST_NODENAME, info.host))
        if info.gw_interface:
            out.append(OvsSetting(info.host, GW_INTERFACE, info.gw_interface))
        if info.gw_nexthop:
            out.append(OvsSetting(info.host, GW_NEXTHOP, info.gw_nexthop))
    out += [
        LogicalPort(port_name(info.host, r), tenant, info.host, port_mac(info.host, r), r) for r in info.representors
    ]
    return out


def slot_ports(info: DpuInfo, tenancy: Tenancy) -> list[LogicalPort]:
    """The logical ports of the live slots of ``info``'s host on its DPU (a shared host whose own
    lease is live; otherwise none): one per slot, named ``<slot>.<dpu>``, in its tenant's switch.
    The VM's VF representor is the hypervisor's choice: it binds it by ``iface-id`` = the name."""
    if tenancy.owner(info.host) == QUARANTINE or not tenancy.shared(info.host):
        return []
    out = []
    for s in tenancy.slots_of(info.host):
        tenant = tenancy.owner(s.name)
        if tenant != QUARANTINE:
            out.append(LogicalPort(slot_port_name(s.name, info), tenant, info.host, port_mac(s.name, info.name), slot=s.name))
    return out


def slot_port_name(slot: str, info: DpuInfo) -> str:
    return f"{slot}.{info.name}"


def desired_state(tenancy: Tenancy) -> DpuState:
    items: list[Item] = []
    for host, info in dpu_inventory(tenancy.nodes).items():
        items += node_items(info, tenancy.owner(host), offering_role(tenancy.offering(host)))
        items += slot_ports(info, tenancy)
    return DpuState.of(items)


def observed_role(state: DpuState, info: DpuInfo) -> str:
    """The role ``state`` shows for ``info``'s host (labels first, then the DPU's OVS)."""
    labels = state.labels_of(info.host)
    if any(k in labels for k in HOST_LABELS):
        return "dpu-host"
    role = state.ovs_of(info.host).get(ROLE_KEY, "none")
    return "dpu-host" if role == "dpu" else role
