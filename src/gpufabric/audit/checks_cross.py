"""Invariants across fabrics and against the desired state, and pass-through findings.

* ``X-NODE-SPLIT``: every port of a node, on every fabric, is in the same tenant (or
  quarantine). A port's *effective* tenants are the owners of what it really carries:
  the VLANs of an Ethernet port, the non-default PKeys of an IB port. A shut-down port,
  an IB port with only the default partition, and VLANs/PKeys no network owns add none.
* ``X-DRIFT``: the store/desired state disagrees with the fabric: an inventory port (or
  a desired one) is missing from the observed state, or its observed configuration
  differs from the desired one. An IB port the fabric does not show is drift only when
  it is owed a tenant PKey (a quarantined port cut off the fabric is as isolated as can be).
* ``IB-HARDENING``: findings computed elsewhere (the IB driver) passed through as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from gpufabric.audit.index import DEFAULT_PKEY, AuditIndex, EthKey, describe_eth, eth_place
from gpufabric.audit.model import AuditInput, Finding
from gpufabric.domain.models import Fabric, Node
from gpufabric.domain.state import EthernetPortConfig, PortMode
from gpufabric.domain.values import Guid

HARDENING_ID = "IB-HARDENING"


def node_split(inp: AuditInput, idx: AuditIndex) -> Iterator[Finding]:
    """X-NODE-SPLIT: flags each port of a split node whose effective tenants are not
    exactly the node's tenant (per the store), and nodes with leases of several tenants.

    One cheap pass over the port rows finds the split nodes; only those are detailed.
    """
    vlan_memo: dict[frozenset[int], frozenset[str]] = {}
    pkey_memo: dict[frozenset[int], frozenset[str]] = {}

    def eth_eff(vlans: frozenset[int]) -> frozenset[str]:
        eff = vlan_memo.get(vlans)
        if eff is None:
            eff = vlan_memo[vlans] = frozenset(o for v in vlans for o in idx.vlan_owners.get(v, ()))
        return eff

    def ib_eff(keys: frozenset[int]) -> frozenset[str]:
        eff = pkey_memo.get(keys)
        if eff is None:
            eff = pkey_memo[keys] = frozenset(o for k in keys for o in idx.pkey_owners.get(k, ()))
        return eff

    first: dict[str, frozenset[str]] = {}
    split: set[str] = set()

    def note(node_name: str, eff: frozenset[str]) -> None:
        seen = first.get(node_name)
        if seen is None:
            first[node_name] = eff
            if len(eff) > 1:
                split.add(node_name)
        elif seen is not eff and seen != eff:
            split.add(node_name)

    for _, _, vlans, node_name, _ in idx.eth_rows():
        if node_name and vlans:
            eff = eth_eff(vlans)
            if eff:
                note(node_name, eff)
    for _, _, node_name, _, _, keys, _ in idx.ib_rows():
        if node_name and keys:
            eff = ib_eff(keys)
            if eff:
                note(node_name, eff)
    for node in inp.nodes:
        leased = idx.node_tenants.get(node.name, ())
        if len(leased) > 1:
            yield Finding(
                f"node {node.name} has active leases of tenants {', '.join(leased)}",
                node=node.name,
                tenants=leased,
            )
        if node.name in split:
            yield from _split_ports(idx, node, eth_eff, ib_eff)


def _split_ports(
    idx: AuditIndex,
    node: Node,
    eth_eff: Callable[[frozenset[int]], frozenset[str]],
    ib_eff: Callable[[frozenset[int]], frozenset[str]],
) -> Iterator[Finding]:
    places: list[tuple[Fabric, str, str, str, frozenset[str]]] = []
    for p in {(p.switch, p.managed_port): p for p in node.ethernet}.values():  # a bond's members: once
        key = (p.switch, p.managed_port)
        if key in idx.eth_vlans:
            places.append((Fabric.ETHERNET, p.switch, p.managed_port, eth_place(key), eth_eff(idx.eth_vlans[key])))
    for q in node.ib:
        table = idx.observed_tables.get(q.port_guid.value)
        if table is not None:
            keys = frozenset(e & 0x7FFF for e in table.entries) - {0, DEFAULT_PKEY}
            places.append((Fabric.INFINIBAND, q.device, str(q.port_guid), f"{q.device} {q.port_guid}", ib_eff(keys)))
    union = sorted({t for *_, eff in places for t in eff})
    expected = idx.tenant_of(node.name)
    for fabric, device, port, label, eff in places:
        if not eff or eff == {expected}:
            continue
        yield Finding(
            f"node {node.name} (tenant {expected}) is split across {', '.join(union)}: "
            f"{label} is in {', '.join(sorted(eff))}",
            fabric=fabric,
            device=device,
            port=port,
            node=node.name,
            tenants=tuple(union),
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
        elif want is not obs and want != obs and not _same_eth(want, obs):
            msg = f"{eth_place(key)}{on}: desired {describe_eth(want)}, observed {describe_eth(obs)}"
        else:
            continue
        yield Finding(msg, fabric=Fabric.ETHERNET, device=key[0], port=key[1], node=node)


def _ib_drift(inp: AuditInput, idx: AuditIndex) -> Iterator[Finding]:
    keys: set[int] = set(idx.ib_ports)
    if idx.desired_tables is not None:
        keys.update(idx.desired_tables)  # covers the observed and the desired GUIDs too
    have_memo: dict[tuple[int, ...], frozenset[int]] = {}
    for key in keys:
        table = idx.observed_tables.get(key)
        if table is not None and idx.desired_tables is None:
            continue
        msg = ""
        if table is None:
            want_keys = idx.desired_tables.get(key) if idx.desired_tables is not None else None
            if want_keys is not None and all(e & 0x7FFF == DEFAULT_PKEY for e in want_keys):
                continue  # unreachable (e.g. cut off after a rogue SM) and owed no tenant key: isolated
            msg = "pkey table not in the observed state"
        elif idx.desired_tables is not None:
            want = idx.desired_tables[key]
            have = have_memo.get(table.entries)
            if have is None:
                have = have_memo[table.entries] = frozenset(e for e in table.entries if e)
            if want == have:
                continue
            msg = (
                f"desired pkeys {_fmt_entries(want)}, observed {_fmt_entries(have)} "
                f"(missing {_fmt_entries(want - have)}, extra {_fmt_entries(have - want)})"
            )
        port = idx.ib_ports.get(key)
        guid = port.port_guid if port else Guid(key)
        device, node = (port.device, port.node) if port else ("", "")
        on = f" (node {node})" if node else ""
        yield Finding(f"port {guid}{on}: {msg}", fabric=Fabric.INFINIBAND, device=device, port=str(guid), node=node)


def hardening(inp: AuditInput, idx: AuditIndex) -> Iterator[Finding]:
    """IB-HARDENING: the extra findings that name this invariant, severity kept."""
    for v in inp.extra_findings:
        if v.invariant == HARDENING_ID:
            yield Finding(
                v.message,
                fabric=Fabric(v.fabric) if v.fabric else None,
                device=v.device,
                port=v.port,
                node=v.node,
                tenants=v.tenants,
                resource=v.resource,
                severity=v.severity,
            )
