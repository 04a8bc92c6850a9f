"""Invariants across fabrics and against the desired state, and pass-through findings.

* ``X-NODE-SPLIT``: every port of a node, on every fabric, is in the same tenant (or
  quarantine). A port's *effective* tenants are the owners of what it really carries:
  the VLANs of an Ethernet port, the non-default PKeys of an IB port. A shut-down port,
  an IB port with only the default partition, and VLANs/PKeys no network owns add none.
* ``X-DRIFT``: the store/desired state disagrees with the fabric: an inventory port (or
  a desired one) is missing from the observed state, or its observed configuration
  differs from the desired one.
* ``IB-HARDENING``: findings computed elsewhere (the IB driver) passed through as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from gpufabric.audit.index import DEFAULT_PKEY, AuditIndex, EthKey, describe_eth, eth_place
from gpufabric.audit.model import AuditInput, Finding
from gpufabric.domain.models import Fabric
from gpufabric.domain.state import EthernetPortConfig, PortMode
from gpufabric.domain.values import Guid

HARDENING_ID = "IB-HARDENING"


def _eth_effective(idx: AuditIndex, cfg: EthernetPortConfig) -> frozenset[str]:
    return frozenset(o for v in cfg.vlans() for o in idx.vlan_owners.get(v, ()))


def _ib_effective(idx: AuditIndex, entries: Iterable[int]) -> frozenset[str]:
    return frozenset(
        o for e in entries if (e & 0x7FFF) not in (0, DEFAULT_PKEY) for o in idx.pkey_owners.get(e & 0x7FFF, ())
    )


def node_split(inp: AuditInput, idx: AuditIndex) -> Iterator[Finding]:
    """X-NODE-SPLIT: flags each port of a split node whose effective tenants are not
    exactly the node's tenant (per the store), and nodes with leases of several tenants."""
    for node in inp.nodes:
        leased = idx.node_tenants.get(node.name, ())
        if len(leased) > 1:
            yield Finding(
                f"node {node.name} has active leases of tenants {', '.join(leased)}",
                node=node.name,
                tenants=leased,
            )
        expected = idx.tenant_of(node.name)
        places: list[tuple[Fabric, str, str, str, frozenset[str]]] = []
        for p in node.ethernet:
            cfg = idx.observed_eth.get((p.switch, p.switch_port))
            if cfg is not None:
                eff = _eth_effective(idx, cfg)
                places.append((Fabric.ETHERNET, p.switch, p.switch_port, eth_place((p.switch, p.switch_port)), eff))
        for q in node.ib:
            table = idx.observed_tables.get(q.port_guid)
            if table is not None:
                eff = _ib_effective(idx, table.entries)
                places.append((Fabric.INFINIBAND, q.device, str(q.port_guid), f"{q.device} {q.port_guid}", eff))
        union = frozenset(t for *_, eff in places for t in eff)
        if len(union) < 2:
            continue
        for fabric, device, port, label, eff in places:
            if not eff or eff == {expected}:
                continue
            yield Finding(
                f"node {node.name} (tenant {expected}) is split across {', '.join(sorted(union))}: "
                f"{label} is in {', '.join(sorted(eff))}",
                fabric=fabric,
                device=device,
                port=port,
                node=node.name,
                tenants=tuple(sorted(union)),
            )


def _same_eth(a: EthernetPortConfig, b: EthernetPortConfig) -> bool:
    if a.mode is not b.mode:
        return False
    if a.mode is PortMode.SHUTDOWN:
        return True
    return a.vlan == b.vlan and frozenset(a.trunks) == frozenset(b.trunks)


def _fmt_entries(entries: Iterable[int]) -> str:
    return ",".join(f"0x{e:04x}" for e in sorted(entries)) or "none"


def drift(inp: AuditInput, idx: AuditIndex) -> Iterator[Finding]:
    """X-DRIFT: desired (or inventory) vs observed, port by port, on both fabrics."""
    yield from _eth_drift(idx)
    yield from _ib_drift(inp, idx)


def _eth_drift(idx: AuditIndex) -> Iterator[Finding]:
    keys: set[EthKey] = set(idx.eth_ports)
    if idx.desired_eth is not None:
        keys.update(idx.desired_eth)
    for key in keys:
        port = idx.eth_ports.get(key)
        node = port.node if port else ""
        on = f" (node {node})" if node else ""
        obs = idx.observed_eth.get(key)
        want = idx.desired_eth.get(key) if idx.desired_eth is not None else None
        if obs is None:
            msg = f"{eth_place(key)}{on} is not in the observed state"
            if want is not None:
                msg += f" (desired {describe_eth(want)})"
        elif idx.desired_eth is None:
            continue
        elif want is None:
            msg = f"{eth_place(key)}{on} has no desired configuration; observed {describe_eth(obs)}"
        elif not _same_eth(want, obs):
            msg = f"{eth_place(key)}{on}: desired {describe_eth(want)}, observed {describe_eth(obs)}"
        else:
            continue
        yield Finding(msg, fabric=Fabric.ETHERNET, device=key[0], port=key[1], node=node)


def _ib_drift(inp: AuditInput, idx: AuditIndex) -> Iterator[Finding]:
    guids: set[Guid] = set(idx.ib_ports)
    if idx.desired_entries is not None:
        guids.update(idx.desired_entries)
        guids.update(idx.observed_tables)
    for guid in guids:
        device, node = idx.ib_place(guid)
        on = f" (node {node})" if node else ""
        table = idx.observed_tables.get(guid)
        if table is None:
            msg = f"port {guid}{on}: pkey table not in the observed state"
        elif idx.desired_entries is None:
            continue
        else:
            want = idx.desired_table(guid)
            have = frozenset(e for e in table.entries if e)
            if want == have:
                continue
            msg = (
                f"port {guid}{on}: desired pkeys {_fmt_entries(want)}, observed {_fmt_entries(have)} "
                f"(missing {_fmt_entries(want - have)}, extra {_fmt_entries(have - want)})"
            )
        yield Finding(msg, fabric=Fabric.INFINIBAND, device=device, port=str(guid), node=node)


def hardening(inp: AuditInput, idx: AuditIndex) -> Iterator[Finding]:
    """IB-HARDENING: the extra findings that name this invariant, severity kept."""
    for v in inp.extra_findings:
        if v.invariant == HARDENING_ID:
            yield Finding(
                v.message,
                fabric=v.fabric,
                device=v.device,
                port=v.port,
                node=v.node,
                tenants=v.tenants,
                resource=v.resource,
                severity=v.severity,
            )
