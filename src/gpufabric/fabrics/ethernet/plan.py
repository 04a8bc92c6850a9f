"""Ethernet's desired slice, pure diff and plan: switch ports on tenant VLANs.

The desired and observed slices are ``tuple[SwitchState, ...]`` (one per switch). A leased
node's ports carry its lease's networks' VLANs (one: access; several: a trunk of exactly
those) — a bonded port's VLANs sit on its aggregate (port-channel, ``ae``, OVS bond), which
quarantine shuts as a whole; its members are not configured one by one. Every other port is SHUTDOWN, which a driver realises as shut down or parked alone in
the quarantine VLAN (never VLAN 1, never untagged).

A desired aggregate lists its members (``EthernetPortConfig.members``): the diff compares a
member's membership only (``bond``, the aggregate it is in), and only when the switch reports
the member as a port (every CLI dialect reads a member with its aggregate: IOS-like
``channel-group``, OS9, Junos ``ether-options 802.3ad``, SONiC ``PORTCHANNEL_MEMBER``, an NVUE
bond's ``member`` list; an OVS bond's members are interfaces of one port, never read):
a member found outside its aggregate, or in another one, is a change that puts it back, and so
is a member shut down in an aggregate that is up (a tenant's bond runs on all its links; members
stay down only with their aggregate, in quarantine). A member read in a channel the switch does
not have is left as read (nothing is planned from it; the audit reports it, ETH-BOND-MEMBER-OUT),
and its node is refused, alone: where the plan would give its bond a tenant's VLAN the aggregate
does not carry yet, it gives none (the aggregate only loses what it must not carry, its members
are left as read) and records a one-line ConflictError naming the node, the member and the
channel (``EthernetPlan.refusals``); the move engine fails the move that joins that node with it
(engine/isolation.py). Every other node's changes are planned; a bond that already carries its
tenant, or goes to quarantine, plans on.

A shared host (issue 33, ``tenancy.shared(host)``): its VM ports (entries with ``gpu``, on the
hypervisor's OVS) follow the lease of the slot holding that GPU (``tenancy.gpu_lease``; none: the
quarantine VLAN), and its uplinks carry a trunk (a trunk even of one VLAN: the hypervisor's bridge
tags each VM's frames) of exactly the host's own lease's VLANs and those of every live slot lease
there (:func:`port_vlans`), so a slot move changes only that slot's VM ports and the uplinks' trunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gpufabric.domain.errors import ConflictError
from gpufabric.domain.fabric import FabricPlan, Tenancy
from gpufabric.domain.models import QUARANTINE, Network
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.entries import KIND, EthernetPort, ethernet_ports
from gpufabric.fabrics.ethernet.segments import DEFAULT_QUARANTINE_VLAN, SETTING, segment_vlan, vlan_of
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState, same_aggregate

EthState = tuple[SwitchState, ...]


DEFAULT_INSTANCE = KIND  # the default instance's name (stored segments keep it)


@dataclass(frozen=True)
class EthernetChange:
    before: EthernetPortConfig | None
    after: EthernetPortConfig

    @property
    def switch(self) -> str:
        return self.after.switch

    def __str__(self) -> str:
        return f"ethernet {self.after.switch}/{self.after.port}: {describe(self.before)} -> {describe(self.after)}"


def describe(c: EthernetPortConfig | None) -> str:
    if c is None:
        return "absent"
    if c.bond:
        return f"member of {c.bond}" + (" (shut down)" if c.mode is PortMode.SHUTDOWN else "")
    if c.mode is PortMode.TRUNK:
        return f"trunk[{','.join(str(v) for v in c.trunks)}]" + (f" native {c.vlan}" if c.vlan else "")
    return f"{c.mode.value} {c.vlan}" if c.vlan else c.mode.value


def port_config(switch: str, port: str, vlans: Iterable[VlanId]) -> EthernetPortConfig:
    """The config of a port carrying exactly ``vlans`` (none: SHUTDOWN)."""
    vs = sorted(set(vlans), key=lambda v: v.value)
    if not vs:
        return EthernetPortConfig(switch, port, PortMode.SHUTDOWN)
    if len(vs) == 1:
        return EthernetPortConfig(switch, port, PortMode.ACCESS, vs[0])
    return EthernetPortConfig(switch, port, PortMode.TRUNK, None, tuple(vs))


def trunk_config(switch: str, port: str, vlans: Iterable[VlanId]) -> EthernetPortConfig:
    """A trunk of exactly ``vlans``, even of one (none: SHUTDOWN): a shared host's uplink."""
    vs = tuple(sorted(set(vlans), key=lambda v: v.value))
    if not vs:
        return EthernetPortConfig(switch, port, PortMode.SHUTDOWN)
    return EthernetPortConfig(switch, port, PortMode.TRUNK, None, vs)


def networks_vlans(networks: Iterable[Network], instance: str = DEFAULT_INSTANCE) -> list[VlanId]:
    """The VLANs of ``networks`` on ``instance`` (networks without a segment there: none)."""
    return [v for n in networks if (s := n.segment(instance)) and (v := segment_vlan(s))]


def uplink_units(tenancy: Tenancy, host: str) -> tuple[str, ...]:
    """The nodes whose leases' VLANs a shared host's uplinks carry: the host and its slots held now."""
    return (host, *(s.name for s in tenancy.slots_of(host) if tenancy.owners.get(s.name) is not None))


def port_vlans(
    tenancy: Tenancy, p: EthernetPort, instance: str = DEFAULT_INSTANCE, shared: bool | None = None
) -> tuple[list[VlanId], bool]:
    """The VLANs ``p`` carries by its lease(s), and whether it is a shared host's uplink (a trunk
    whatever their number); ``shared``: ``tenancy.shared(p.node)`` when the caller knows it."""
    if shared is None:
        shared = tenancy.shared(p.node)
    if p.gpu is None and shared:
        units = uplink_units(tenancy, p.node)
        return [v for u in units for v in networks_vlans(tenancy.lease_networks(u), instance)], True
    unit = (tenancy.gpu_unit(p.node, p.gpu) if shared else p.node) if p.gpu is not None else p.node
    return (networks_vlans(tenancy.lease_networks(unit), instance) if unit is not None else []), False


def removal_of(change: EthernetChange) -> EthernetPortConfig:
    """The config that drops every VLAN ``change`` removes and adds none: the VLANs the port
    carries both before and after (none: SHUTDOWN)."""
    before = change.before.vlans() if change.before is not None else frozenset()
    keep = before & change.after.vlans()
    return port_config(change.after.switch, change.after.port, (VlanId(v) for v in keep))


@dataclass(frozen=True)
class EthernetPlan(FabricPlan):
    fabric = "ethernet"
    changes: tuple[EthernetChange, ...] = ()
    refused: tuple[ConflictError, ...] = field(default=(), compare=False)  # missing_channel's, one a node

    def refusals(self) -> dict[str, ConflictError]:
        return {str(e.fields["node"]): e for e in self.refused}

    @property
    def empty(self) -> bool:
        return not self.changes

    def lines(self) -> list[str]:
        return [str(c) for c in self.changes]

    def __len__(self) -> int:
        return len(self.changes)  # one line per change, without formatting them

    def to_dict(self) -> list[dict[str, str]]:
        return [
            {"switch": c.after.switch, "port": c.after.port, "before": describe(c.before), "after": describe(c.after)}
            for c in self.changes
        ]

    def by_switch(self) -> dict[str, tuple[EthernetPortConfig, ...]]:
        out: dict[str, list[EthernetPortConfig]] = {}
        for c in self.changes:
            out.setdefault(c.switch, []).append(c.after)
        return {k: tuple(v) for k, v in sorted(out.items())}

    def split(self) -> tuple[EthernetPlan, EthernetPlan]:
        removals: list[EthernetChange] = []
        additions: list[EthernetChange] = []
        for c in self.changes:
            if c.after.bond:  # putting a member back in its aggregate grants, never removes
                additions.append(c)
                continue
            mid = removal_of(c)
            if c.before is None or mid != c.before:
                removals.append(EthernetChange(c.before, mid))
            if mid != c.after:
                additions.append(EthernetChange(mid, c.after))
        return EthernetPlan(tuple(removals)), EthernetPlan(tuple(additions))


def desired_switches(tenancy: Tenancy, instance: str = DEFAULT_INSTANCE) -> EthState:
    """Every managed port's desired config, per switch (a network's VLAN: its segment on ``instance``)."""
    ports: dict[str, list[EthernetPortConfig]] = {}
    members: dict[tuple[str, str], list[str]] = {}
    modes: dict[tuple[str, str], str] = {}
    for node in tenancy.nodes:
        shared = tenancy.shared(node.name)
        for p in ethernet_ports(node, instance):  # a bond's members share their aggregate: set once, on it
            vlans, trunk = port_vlans(tenancy, p, instance, shared)
            cfg = (trunk_config if trunk else port_config)(p.switch, p.managed_port, vlans)
            ports.setdefault(p.switch, []).append(replace(cfg, node=node.name) if p.bond else cfg)
            if p.bond:  # ... which lists its members on this switch
                members.setdefault((p.switch, p.bond), []).append(p.switch_port)
                modes[(p.switch, p.bond)] = p.bond_mode
    out = []
    for sw, ps in sorted(ports.items()):
        cfgs = (replace(c, members=tuple(sorted(set(members[k]))), bond_mode=modes[k]) if (k := (sw, c.port)) in members else c
                for c in sorted(set(ps)))  # fmt: skip
        out.append(SwitchState(sw, tuple(cfgs)))
    return tuple(out)


def member_changes(
    want: EthernetPortConfig, have_agg: EthernetPortConfig | None, have_sw: SwitchState | None
) -> tuple[list[EthernetChange], ConflictError | None]:
    """A desired aggregate's members that the switch reports outside it, or in it but shut down
    while it is up (a tenant's bond runs on all its links): each goes back in / up (the change's
    ``after``: the member with the aggregate's VLANs, ``bond`` the aggregate). A member read in
    a channel the switch does not have is left as read; when the plan would give the aggregate
    (``have_agg`` as read) a VLAN it does not carry yet, the second value is the node's refusal
    (:func:`missing_channel`) and no member is changed."""
    out = []
    for m in want.members:
        have = have_sw.port(m) if have_sw is not None else None
        if have is None:
            continue
        inside = same_aggregate(have.bond, want.port)
        if not inside and have.bond and have_sw is not None and not has_aggregate(have_sw, have.bond):
            if want.vlans() - (have_agg.vlans() if have_agg is not None else frozenset()):
                return [], missing_channel(have, want)
            continue  # left as read (nothing is planned from it): the audit reports it
        if not inside or (have.mode is PortMode.SHUTDOWN and want.mode is not PortMode.SHUTDOWN):
            out.append(EthernetChange(have, replace(want, port=m, bond=want.port, members=(), node="")))
    return out, None


def has_aggregate(sw: SwitchState, name: str) -> bool:
    """The switch reports ``name`` (however spelled) as one of its ports."""
    return any(same_aggregate(p.port, name) for p in sw.ports)


def missing_channel(member: EthernetPortConfig, want: EthernetPortConfig) -> ConflictError:
    """The switch reads ``member`` of the desired aggregate ``want`` in a channel it does not
    have: its config is inconsistent (an IOS-like CLI creates the channel with its first member)
    or was read in part, so the node is not given a tenant over that bond; one line names the
    node, the member, its bond and the missing channel."""
    node = want.node or "?"
    return ConflictError(
        f"ethernet {member.switch}/{member.port}: member of {node}'s bond {want.port} is read in {member.bond}, "
        f"which {member.switch} does not have: {node} is not given its tenant's VLANs "
        "(check the switch's configuration, then put the member back)",
        fabric="ethernet", node=node, device=member.switch, port=member.port, bond=want.port, channel=member.bond,
    )  # fmt: skip


def diff_switches(desired: EthState, observed: EthState) -> EthernetPlan:
    """The changes, and the nodes refused (a bond member in a missing channel): a refused
    aggregate only drops the VLANs it carries beyond its desired ones (:func:`removal_of`)."""
    seen = {s.switch: s for s in observed}
    changes: list[EthernetChange] = []
    refused: dict[str, ConflictError] = {}
    for want_sw in desired:
        have_sw = seen.get(want_sw.switch)
        for want in want_sw.ports:
            have = have_sw.port(want.port) if have_sw is not None else None
            members, refusal = member_changes(want, have, have_sw)
            if refusal is not None:
                refused.setdefault(str(refusal.fields["node"]), refusal)
                want = replace(removal_of(EthernetChange(have, want)), members=want.members, bond_mode=want.bond_mode)
            if have != want:
                changes.append(EthernetChange(have, want))
            changes += members
    return EthernetPlan(tuple(changes), tuple(refused.values()))


def merge_switches(observed: EthState, read_back: EthState) -> EthState:
    """``observed`` with every port of ``read_back`` replaced (switches and ports not read back kept)."""
    by_switch = {s.switch: {p.port: p for p in s.ports} for s in observed}
    for s in read_back:
        by_switch.setdefault(s.switch, {}).update({p.port: p for p in s.ports})
    return tuple(SwitchState(sw, tuple(sorted(ps.values()))) for sw, ps in sorted(by_switch.items()))


def vlan_owners(tenancy: Tenancy, quarantine_vlan: int, instance: str = DEFAULT_INSTANCE) -> Mapping[int, str]:
    out: dict[int, str] = {quarantine_vlan: QUARANTINE}
    for net in tenancy.networks.values():
        seg = net.segment(instance)
        if seg is not None:
            out[vlan_of(seg)] = net.tenant
    return out


def seen_as(tenancy: Tenancy, p: EthernetPort) -> tuple[str | None, frozenset[str]]:
    """Whom an observed port of ``p`` is seen as: the node it is counted for (a VM port of a
    shared host: its GPU's slot; None: no slot holds the GPU, counted for nobody) and the tenants
    whose VLANs count as that node's own tenant (a shared host's uplink: the host's and those of its
    live slots, which it carries by design; elsewhere none)."""
    if p.gpu is not None and tenancy.shared(p.node):
        return tenancy.gpu_unit(p.node, p.gpu), frozenset()
    if p.gpu is None and tenancy.shared(p.node):
        return p.node, frozenset({tenancy.owner(p.node), *(lease.tenant for lease in tenancy.slot_leases(p.node))})
    return p.node, frozenset()


def as_seen(tenants: Iterable[str], node_tenant: str, own: frozenset[str]) -> set[str]:
    """``tenants`` with each of ``own`` counted as ``node_tenant`` (:func:`seen_as`)."""
    return {node_tenant if t in own else t for t in tenants}


def tenants_seen(
    observed: EthState, tenancy: Tenancy, quarantine_vlan: int, instance: str = DEFAULT_INSTANCE
) -> dict[str, frozenset[str]]:
    owners = vlan_owners(tenancy, quarantine_vlan, instance)
    where = {(p.switch, p.managed_port): p for n in tenancy.nodes for p in ethernet_ports(n, instance)}
    out: dict[str, set[str]] = {}
    for sw in observed:
        for cfg in sw.ports:
            p = where.get((cfg.switch, cfg.port))
            if p is None:
                continue
            node, own = seen_as(tenancy, p)
            if node is None:
                continue
            vlans = cfg.vlans()
            tenants = {owners.get(v, f"vlan:{v}") for v in vlans} if vlans else {QUARANTINE}
            out.setdefault(node, set()).update(as_seen(tenants, tenancy.owner(node), own) if own else tenants)
    return {k: frozenset(v) for k, v in out.items()}


def settings_quarantine_vlan(settings: Mapping[str, Any]) -> int:
    """The quarantine VLAN of ``settings`` (``Tenancy.settings``, a build's): config.yaml's, else the default."""
    v = settings.get(SETTING, DEFAULT_QUARANTINE_VLAN)
    return v.value if isinstance(v, VlanId) else int(v)
