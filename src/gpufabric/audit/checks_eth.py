"""Ethernet isolation invariants, checked on the *observed* switch port configurations.

A port's tenant is the tenant of the node cabled to it (its active lease, else
quarantine). A VLAN's owners are the tenants whose networks use it (the quarantine VLAN
is owned by quarantine). Ports that no inventory node is cabled to (uplinks, spare
ports) only take part in ``ETH-VLAN1``.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpufabric.audit.index import AuditIndex, EthRow, describe_eth, eth_place, fmt_vlans
from gpufabric.audit.model import AuditInput, Finding
from gpufabric.domain.models import Fabric
from gpufabric.domain.state import PortMode

ETH = Fabric.ETHERNET


def vlan_shared(inp: AuditInput, idx: AuditIndex) -> Iterator[Finding]:
    """ETH-VLAN-SHARED: a VLAN carried by ports of nodes of two or more tenants.

    Flags every port on such a VLAN whose tenant does not own the VLAN (all of its
    ports when none of the tenants present owns it).
    """
    by_vlan: dict[int, list[EthRow]] = {}
    for row in idx.eth_rows():
        if row[3]:
            for vlan in row[2]:
                by_vlan.setdefault(vlan, []).append(row)
    for vlan, members in by_vlan.items():
        tenants = {m[4] for m in members}
        if len(tenants) < 2:
            continue
        rightful = idx.vlan_owners.get(vlan, frozenset()) & tenants
        for key, _, _, node, tenant in members:
            if tenant in rightful:
                continue
            others = ", ".join(sorted(tenants - {tenant}))
            yield Finding(
                f"vlan {vlan} on {eth_place(key)} (node {node}, tenant {tenant}) is shared with tenant(s) {others}",
                fabric=ETH,
                device=key[0],
                port=key[1],
                node=node,
                tenants=tuple(sorted(tenants)),
                resource=f"vlan:{vlan}",
            )


def unleased_not_quarantined(inp: AuditInput, idx: AuditIndex) -> Iterator[Finding]:
    """ETH-UNLEASED-NOT-QUARANTINED: a node without an active lease has a port that is
    neither shut down nor carrying exactly the quarantine VLAN."""
    quarantine = frozenset({idx.quarantine_vlan})
    for node in inp.nodes:
        if node.name in idx.node_tenants:
            continue
        for p in {(p.switch, p.managed_port): p for p in node.ethernet}.values():  # a bond's members: once
            key = (p.switch, p.managed_port)
            cfg = idx.observed_eth.get(key)
            if cfg is None or cfg.mode is PortMode.SHUTDOWN:
                continue  # an unobserved port is reported by X-DRIFT
            vlans = idx.eth_vlans[key]
            if vlans == quarantine:
                continue
            yield Finding(
                f"unleased node {node.name}: {eth_place(key)} is {describe_eth(cfg)}, "
                f"not quarantine vlan {idx.quarantine_vlan}",
                fabric=ETH,
                device=p.switch,
                port=p.managed_port,
                node=node.name,
                resource=f"vlan:{fmt_vlans(vlans)}" if vlans else "",
            )


def trunk_foreign_vlan(inp: AuditInput, idx: AuditIndex) -> Iterator[Finding]:
    """ETH-TRUNK-FOREIGN-VLAN: a trunk port of a node carries (native or tagged) a VLAN
    its node's tenant does not own."""
    for key, cfg, vlans, node, tenant in idx.eth_rows():
        if cfg.mode is not PortMode.TRUNK or not node:
            continue
        foreign = [v for v in vlans if tenant not in idx.vlan_owner_set(v)]
        if not foreign:
            continue
        owners = sorted({o for v in foreign for o in idx.vlan_owner_set(v)})
        yield Finding(
            f"trunk {eth_place(key)} (node {node}, tenant {tenant}) carries vlan(s) {fmt_vlans(foreign)} "
            f"owned by {', '.join(owners)}",
            fabric=ETH,
            device=key[0],
            port=key[1],
            node=node,
            tenants=tuple(sorted({tenant, *owners})),
            resource=f"vlan:{fmt_vlans(foreign)}",
        )


def vlan1(inp: AuditInput, idx: AuditIndex) -> Iterator[Finding]:
    """ETH-VLAN1: a managed port carries VLAN 1 (access, native or tagged)."""
    for key, cfg, vlans, node, _ in idx.eth_rows():
        if 1 not in vlans:
            continue
        who = f" (node {node})" if node else ""
        yield Finding(
            f"{eth_place(key)}{who} carries vlan 1: {describe_eth(cfg)}",
            fabric=ETH,
            device=key[0],
            port=key[1],
            node=node,
            resource="vlan:1",
        )
