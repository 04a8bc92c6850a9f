"""Lookup indexes built once per audit so that every check is linear in the input.

``AuditIndex.build`` walks the inventory, leases, networks, desired and observed state
exactly once: (switch, port) -> Ethernet port, port GUID -> IB port, node -> tenant,
VLAN/PKey -> owning tenants, and the observed/desired configuration of each port.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpufabric.audit.model import AuditInput
from gpufabric.domain.models import QUARANTINE, EthernetPort, Fabric, IbPort
from gpufabric.domain.state import EthernetPortConfig, PartitionLayout, PkeyTable, PortMode
from gpufabric.domain.values import Guid, Membership

DEFAULT_PKEY: Final = 0x7FFF
"""The default partition's 15-bit number (table entries 0x7fff limited, 0xffff full)."""

UNOWNED: Final = "(unowned)"
"""Owner label of a VLAN/PKey that no network and no quarantine claims."""

NOT_IN_INVENTORY: Final = "(not in inventory)"
"""Tenant label of a port GUID that is not in the inventory."""

EthKey = tuple[str, str]


EthRow = tuple[EthKey, EthernetPortConfig, frozenset[int], str, str]
"""(key, config, VLANs carried, node, tenant) of one observed switch port; node and
tenant are "" when no inventory node is cabled to the port."""

IbRow = tuple[Guid, str, str, str, tuple[int, ...], frozenset[int], frozenset[int]]
"""(GUID, device, node, tenant, entries, tenant PKeys held, PKeys held as full member)
of one observed PKey table that is not the SM node's; device and node are "" and the
tenant NOT_IN_INVENTORY when the GUID is not in the inventory. PKeys are 15-bit, the
default partition and 0 left out."""


@dataclass(frozen=True)
class AuditIndex:
    """GUID-keyed maps use ``Guid.value`` (a plain int) as the key."""

    eth_ports: Mapping[EthKey, EthernetPort]
    ib_ports: Mapping[int, IbPort]
    node_tenants: Mapping[str, tuple[str, ...]]  # only nodes with an active lease, sorted
    tenant: Mapping[str, str]  # every inventory node -> its (first) lease tenant or quarantine
    vlan_owners: Mapping[int, frozenset[str]]
    pkey_owners: Mapping[int, frozenset[str]]
    observed_eth: Mapping[EthKey, EthernetPortConfig]
    eth_columns: tuple[tuple[Any, ...], ...]  # EthRow fields, one tuple per field (see eth_rows)
    eth_vlans: Mapping[EthKey, frozenset[int]]
    observed_tables: Mapping[int, PkeyTable]
    ib_columns: tuple[tuple[Any, ...], ...]  # IbRow fields, one tuple per field (see ib_rows)
    entry_keys: Mapping[tuple[int, ...], tuple[frozenset[int], frozenset[int]]]  # entries -> (keys, full keys)
    sm_keys: frozenset[int]
    desired_eth: Mapping[EthKey, EthernetPortConfig] | None
    desired_tables: Mapping[int, frozenset[int]] | None  # every inventory/observed/desired GUID
    quarantine_vlan: int

    @classmethod
    def build(cls, inp: AuditInput) -> AuditIndex:
        eth: dict[EthKey, EthernetPort] = {}
        ib: dict[int, IbPort] = {}
        for n in inp.nodes:
            for p in n.ethernet:
                eth[(p.switch, p.managed_port)] = p
            for q in n.ib:
                ib[q.port_guid.value] = q
        leased: dict[str, set[str]] = {}
        for lease in inp.leases:
            leased.setdefault(lease.node, set()).add(lease.tenant)
        node_tenants = {k: tuple(sorted(v)) for k, v in leased.items()}
        tenant = {n.name: node_tenants[n.name][0] if n.name in node_tenants else QUARANTINE for n in inp.nodes}
        vlans: dict[int, set[str]] = {inp.quarantine_vlan.value: {QUARANTINE}}
        pkeys: dict[int, set[str]] = {}
        for net in inp.networks:
            for seg in net.segments:
                if seg.fabric == Fabric.ETHERNET:
                    vlans.setdefault(seg.vlan.value if seg.vlan else seg.seg_id, set()).add(net.tenant)
                elif seg.fabric == Fabric.INFINIBAND and seg.pkey is not None:
                    pkeys.setdefault(seg.pkey.value, set()).add(net.tenant)
        tables = {t.port_guid.value: t for t in inp.observed.ib.tables}
        observed_eth = {(c.switch, c.port): c for s in inp.observed.switches for c in s.ports}
        eth_columns = _eth_columns(observed_eth, eth, tenant)
        entry_keys = {e: _split_entries(e) for e in {t.entries for t in tables.values()}}
        sm = {g.value for g in inp.sm_port_guids}
        return cls(
            eth_ports=eth,
            ib_ports=ib,
            node_tenants=node_tenants,
            tenant=tenant,
            vlan_owners={k: frozenset(v) for k, v in vlans.items()},
            pkey_owners={k: frozenset(v) for k, v in pkeys.items()},
            observed_eth=observed_eth,
            eth_columns=eth_columns,
            eth_vlans=dict(zip(eth_columns[0], eth_columns[2], strict=True)),
            observed_tables=tables,
            ib_columns=_ib_columns(tables, ib, tenant, sm, entry_keys),
            entry_keys=entry_keys,
            sm_keys=frozenset(sm),
            desired_eth=None
            if inp.desired_switches is None
            else {(c.switch, c.port): c for s in inp.desired_switches for c in s.ports},
            desired_tables=None if inp.desired_layout is None else _desired_tables(inp.desired_layout, ib, tables),
            quarantine_vlan=inp.quarantine_vlan.value,
        )

    # ------------------------------------------------------------------ lookups
    def tenant_of(self, node: str) -> str:
        """The node's tenant per the store: its lease's tenant, else quarantine."""
        return self.tenant.get(node, QUARANTINE)

    def vlan_owner_set(self, vlan: int) -> frozenset[str]:
        return self.vlan_owners.get(vlan, _UNOWNED_SET)

    def pkey_owner_set(self, pkey: int) -> frozenset[str]:
        return self.pkey_owners.get(pkey, _UNOWNED_SET)

    def eth_rows(self) -> Iterator[EthRow]:
        """Every observed switch port as an ``EthRow``."""
        return zip(*self.eth_columns, strict=True)

    def ib_rows(self) -> Iterator[IbRow]:
        """Every observed PKey table but the SM node's, as an ``IbRow``.

        Rows are kept as columns of existing objects and zipped on the fly, so that an
        audit keeps almost no per-port objects alive (less work for the garbage collector).
        """
        return zip(*self.ib_columns, strict=True)

    def ib_place(self, guid: Guid) -> tuple[str, str]:
        """(device, node) of a port GUID, empty strings when not in the inventory."""
        p = self.ib_ports.get(guid.value)
        return (p.device, p.node) if p else ("", "")


_UNOWNED_SET: Final = frozenset({UNOWNED})
_EMPTY: Final[frozenset[int]] = frozenset()


def _split_entries(entries: tuple[int, ...]) -> tuple[frozenset[int], frozenset[int]]:
    keys = frozenset(e & 0x7FFF for e in entries) - {0, DEFAULT_PKEY}
    full = frozenset(e & 0x7FFF for e in entries if e & 0x8000) - {0, DEFAULT_PKEY}
    return keys, full


def _eth_columns(
    observed: Mapping[EthKey, EthernetPortConfig], eth: Mapping[EthKey, EthernetPort], tenant: Mapping[str, str]
) -> tuple[tuple[Any, ...], ...]:
    keys, cfgs, vlans, nodes, tenants = [], [], [], [], []
    memo: dict[frozenset[int], frozenset[int]] = {}
    for key, cfg in observed.items():
        p = eth.get(key)
        v = cfg.vlans()
        keys.append(key)
        cfgs.append(cfg)
        vlans.append(memo.setdefault(v, v))  # share equal sets
        nodes.append(p.node if p else "")
        tenants.append(tenant[p.node] if p else "")
    return tuple(keys), tuple(cfgs), tuple(vlans), tuple(nodes), tuple(tenants)


def _ib_columns(
    tables: Mapping[int, PkeyTable],
    ib: Mapping[int, IbPort],
    tenant: Mapping[str, str],
    sm: set[int],
    entry_keys: Mapping[tuple[int, ...], tuple[frozenset[int], frozenset[int]]],
) -> tuple[tuple[Any, ...], ...]:
    cols: tuple[list[Any], ...] = ([], [], [], [], [], [], [])
    guids, devices, nodes, tenants, entries, keys, full = cols
    for key, t in tables.items():
        if key in sm:
            continue
        p = ib.get(key)
        k, f = entry_keys[t.entries]
        guids.append(t.port_guid)
        devices.append(p.device if p else "")
        nodes.append(p.node if p else "")
        tenants.append(tenant[p.node] if p else NOT_IN_INVENTORY)
        entries.append(t.entries)
        keys.append(k)
        full.append(f)
    return tuple(tuple(c) for c in cols)


def _desired_tables(
    layout: PartitionLayout, ib: Mapping[int, IbPort], tables: Mapping[int, PkeyTable]
) -> dict[int, frozenset[int]]:
    """The raw table entries the layout gives each GUID, default partition included."""
    single: dict[int, frozenset[int]] = {}
    members: dict[int, frozenset[int]] = {}
    for part in layout.partitions:
        for m in part.members:
            entry = part.pkey.value | (0x8000 if m.membership is Membership.FULL else 0)
            one = single.get(entry)
            if one is None:
                one = single[entry] = frozenset({entry})
            cur = members.get(m.guid.value)
            members[m.guid.value] = one if cur is None else cur | one
    full = {g.value for g in layout.default_full}
    memo: dict[frozenset[int], frozenset[int]] = {}
    out: dict[int, frozenset[int]] = {}
    for key in {*members, *ib, *tables, *full}:
        base = members.get(key, _EMPTY)
        if key in full:
            out[key] = base | {DEFAULT_PKEY | 0x8000}
            continue
        cached = memo.get(base)
        if cached is None:
            cached = memo[base] = base | {DEFAULT_PKEY} if layout.default_limited_all else base
        out[key] = cached
    return out


def eth_place(key: EthKey) -> str:
    """``switch/port`` as printed in messages."""
    return f"{key[0]}/{key[1]}"


def fmt_vlans(vlans: Iterable[int]) -> str:
    return ",".join(str(v) for v in sorted(vlans))


def fmt_pkeys(pkeys: Iterable[int]) -> str:
    return ",".join(f"0x{p:04x}" for p in sorted(pkeys))


def describe_eth(c: EthernetPortConfig) -> str:
    """A port configuration as one short phrase, e.g. ``access vlan 2001`` or ``trunk native 1 tagged 5,6``."""
    if c.mode is PortMode.SHUTDOWN:
        return "shutdown"
    if c.mode is PortMode.ACCESS:
        return f"access vlan {c.vlan.value if c.vlan else 'none'}"
    native = f" native {c.vlan.value}" if c.vlan else ""
    tagged = fmt_vlans(v.value for v in c.trunks) or "none"
    return f"trunk{native} tagged {tagged}"
