"""Desired fabric state, derived (purely) from the inventory, the active leases and the
moves in flight.

Every port of a node belongs to exactly one owner: the node's tenant (through its
lease) or quarantine. A move in flight overrides the lease: while it is in its
quarantine phase the node is desired in quarantine on every fabric.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpufabric.domain.models import QUARANTINE, Fabric, Lease, Network, Node
from gpufabric.domain.state import (
    EthernetPortConfig,
    Partition,
    PartitionLayout,
    PartitionMember,
    PortMode,
    SwitchState,
)
from gpufabric.domain.values import Guid, Membership, VlanId


@dataclass(frozen=True)
class DesiredState:
    """What every fabric should look like, plus who owns each node."""

    switches: tuple[SwitchState, ...]
    ib: PartitionLayout
    owners: tuple[tuple[str, str], ...]  # (node, tenant or QUARANTINE), sorted

    def owner(self, node: str) -> str:
        return dict(self.owners).get(node, QUARANTINE)

    def switch(self, name: str) -> SwitchState | None:
        return next((s for s in self.switches if s.switch == name), None)


def partition_name(network: Network) -> str:
    """A stable OpenSM-safe partition name for a tenant network."""
    return re.sub(r"[^A-Za-z0-9_]", "_", f"{network.tenant}__{network.name}")[:64]


def owners_of(
    nodes: Iterable[Node], leases: Iterable[Lease], overrides: Mapping[str, str] | None = None
) -> dict[str, Lease | None]:
    """node -> the lease that owns it now (None: quarantine). ``overrides`` maps a node to
    QUARANTINE to force it there whatever its lease (a move in its quarantine phase)."""
    by_node: dict[str, Lease | None] = {n.name: None for n in nodes}
    for lease in leases:
        if lease.node in by_node:
            by_node[lease.node] = lease
    for node, who in (overrides or {}).items():
        if who == QUARANTINE and node in by_node:
            by_node[node] = None
    return by_node


def _eth_config(switch: str, port: str, vlans: list[VlanId]) -> EthernetPortConfig:
    if not vlans:
        return EthernetPortConfig(switch, port, PortMode.SHUTDOWN)
    if len(vlans) == 1:
        return EthernetPortConfig(switch, port, PortMode.ACCESS, vlans[0])
    return EthernetPortConfig(switch, port, PortMode.TRUNK, None, tuple(sorted(vlans)))


def derive_desired(
    nodes: Iterable[Node],
    leases: Iterable[Lease],
    networks: Iterable[Network],
    sm_port_guids: Iterable[Guid] = (),
    overrides: Mapping[str, str] | None = None,
) -> DesiredState:
    """Desired Ethernet port configs per switch and the InfiniBand partition layout.

    A leased node's Ethernet ports carry its lease's networks' VLANs (one: access; several:
    a trunk with only those VLANs); its IB ports are full members of those networks' PKeys.
    Unleased ports are quarantined: SHUTDOWN, which a driver realises as shut down or
    parked alone in the quarantine VLAN (never VLAN 1, never untagged); their IB ports
    are members of no tenant PKey. Hosts are limited members of the default partition; the SM is full.
    """
    node_list = sorted(nodes, key=lambda n: n.name)
    nets = {(n.tenant, n.name): n for n in networks}  # network names are unique per tenant only
    owner = owners_of(node_list, leases, overrides)
    ports_by_switch: dict[str, list[EthernetPortConfig]] = {}
    members: dict[tuple[str, str], set[Guid]] = {}
    for node in node_list:
        lease = owner[node.name]
        keys = [(lease.tenant, name) for name in lease.networks] if lease else []
        lease_nets = [nets[k] for k in keys if k in nets]
        vlans = sorted(
            {s.vlan for n in lease_nets if (s := n.segment(Fabric.ETHERNET)) and s.vlan}, key=lambda v: v.value
        )
        for p in node.ethernet:
            cfg = _eth_config(p.switch, p.switch_port, vlans)
            ports_by_switch.setdefault(p.switch, []).append(cfg)
        for net in lease_nets:
            if net.segment(Fabric.INFINIBAND) is not None:
                members.setdefault((net.tenant, net.name), set()).update(p.port_guid for p in node.ib)
    partitions = []
    for key in sorted(members):
        net = nets[key]
        seg = net.segment(Fabric.INFINIBAND)
        assert seg is not None and seg.pkey is not None
        partitions.append(
            Partition(
                partition_name(net),
                seg.pkey.with_membership(Membership.FULL),
                tuple(PartitionMember(g, Membership.FULL) for g in sorted(members[key])),
            )
        )
    switches = tuple(SwitchState(sw, tuple(sorted(ps))) for sw, ps in sorted(ports_by_switch.items()))
    owners = tuple((n, lease.tenant if lease else QUARANTINE) for n, lease in sorted(owner.items()))
    layout = PartitionLayout(tuple(partitions), tuple(sorted(set(sm_port_guids))))
    return DesiredState(switches, layout, owners)
