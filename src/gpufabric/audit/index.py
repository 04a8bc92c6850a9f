"""Lookup indexes built once per audit so that every check is linear in the input.

``AuditIndex.build`` walks the inventory, leases, networks, desired and observed state
exactly once: (switch, port) -> Ethernet port, port GUID -> IB port, node -> tenant,
VLAN/PKey -> owning tenants, and the observed/desired configuration of each port.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from gpufabric.audit.model import AuditInput
from gpufabric.domain.models import QUARANTINE, EthernetPort, Fabric, IbPort
from gpufabric.domain.state import EthernetPortConfig, PartitionLayout, PkeyTable, PortMode
from gpufabric.domain.values import Guid, Membership

DEFAULT_PKEY: Final = 0x7FFF
"""The default partition's 15-bit number (table entries 0x7fff limited, 0xffff full)."""

UNOWNED: Final = "(unowned)"
"""Owner label of a VLAN/PKey that no network and no quarantine claims."""

EthKey = tuple[str, str]


@dataclass(frozen=True)
class AuditIndex:
    eth_ports: Mapping[EthKey, EthernetPort]
    ib_ports: Mapping[Guid, IbPort]
    node_tenants: Mapping[str, tuple[str, ...]]  # only nodes with an active lease
    vlan_owners: Mapping[int, frozenset[str]]
    pkey_owners: Mapping[int, frozenset[str]]
    observed_eth: Mapping[EthKey, EthernetPortConfig]
    observed_tables: Mapping[Guid, PkeyTable]
    desired_eth: Mapping[EthKey, EthernetPortConfig] | None
    desired_entries: Mapping[Guid, frozenset[int]] | None  # explicit partition members only
    desired_default_full: frozenset[Guid]
    desired_default_limited_all: bool
    quarantine_vlan: int

    @classmethod
    def build(cls, inp: AuditInput) -> AuditIndex:
        eth: dict[EthKey, EthernetPort] = {}
        ib: dict[Guid, IbPort] = {}
        for n in inp.nodes:
            for p in n.ethernet:
                eth[(p.switch, p.switch_port)] = p
            for q in n.ib:
                ib[q.port_guid] = q
        tenants: dict[str, set[str]] = {}
        for lease in inp.leases:
            tenants.setdefault(lease.node, set()).add(lease.tenant)
        vlans: dict[int, set[str]] = {inp.quarantine_vlan.value: {QUARANTINE}}
        pkeys: dict[int, set[str]] = {}
        for net in inp.networks:
            for seg in net.segments:
                if seg.fabric is Fabric.ETHERNET:
                    vlans.setdefault(seg.vlan.value if seg.vlan else seg.seg_id, set()).add(net.tenant)
                elif seg.fabric is Fabric.INFINIBAND and seg.pkey is not None:
                    pkeys.setdefault(seg.pkey.value, set()).add(net.tenant)
        observed_eth = {(c.switch, c.port): c for s in inp.observed.switches for c in s.ports}
        desired_eth = (
            None
            if inp.desired_switches is None
            else {(c.switch, c.port): c for s in inp.desired_switches for c in s.ports}
        )
        layout = inp.desired_layout
        return cls(
            eth_ports=eth,
            ib_ports=ib,
            node_tenants={k: tuple(sorted(v)) for k, v in tenants.items()},
            vlan_owners={k: frozenset(v) for k, v in vlans.items()},
            pkey_owners={k: frozenset(v) for k, v in pkeys.items()},
            observed_eth=observed_eth,
            observed_tables={t.port_guid: t for t in inp.observed.ib.tables},
            desired_eth=desired_eth,
            desired_entries=None if layout is None else _member_entries(layout),
            desired_default_full=frozenset(layout.default_full) if layout else frozenset(),
            desired_default_limited_all=layout.default_limited_all if layout else True,
            quarantine_vlan=inp.quarantine_vlan.value,
        )

    # ------------------------------------------------------------------ lookups
    def tenant_of(self, node: str) -> str:
        """The node's tenant per the store: its lease's tenant, else quarantine."""
        t = self.node_tenants.get(node)
        return t[0] if t else QUARANTINE

    def vlan_owner_set(self, vlan: int) -> frozenset[str]:
        return self.vlan_owners.get(vlan, frozenset({UNOWNED}))

    def pkey_owner_set(self, pkey: int) -> frozenset[str]:
        return self.pkey_owners.get(pkey, frozenset({UNOWNED}))

    def ib_place(self, guid: Guid) -> tuple[str, str]:
        """(device, node) of a port GUID, empty strings when not in the inventory."""
        p = self.ib_ports.get(guid)
        return (p.device, p.node) if p else ("", "")

    def desired_table(self, guid: Guid) -> frozenset[int]:
        """The raw PKey table entries the desired layout gives ``guid`` (default partition included).

        Only meaningful when ``desired_entries`` is not None.
        """
        entries = set(self.desired_entries.get(guid, frozenset())) if self.desired_entries else set()
        if guid in self.desired_default_full:
            entries.add(DEFAULT_PKEY | 0x8000)
        elif self.desired_default_limited_all:
            entries.add(DEFAULT_PKEY)
        return frozenset(entries)


def _member_entries(layout: PartitionLayout) -> dict[Guid, frozenset[int]]:
    out: dict[Guid, set[int]] = {}
    for part in layout.partitions:
        for m in part.members:
            entry = part.pkey.value | (0x8000 if m.membership is Membership.FULL else 0)
            out.setdefault(m.guid, set()).add(entry)
    return {g: frozenset(e) for g, e in out.items()}


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
