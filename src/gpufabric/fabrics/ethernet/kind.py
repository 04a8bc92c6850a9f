"""The Ethernet fabric on the seam: VLAN allocation, desired ports, diff, and the backend
that drives every switch of ``fabrics.yaml``'s ``ethernet:`` list (:mod:`.backend`), composed
from the package's layers: drivers, readers, audit, plan and the pure values below.

``fabrics.yaml``::

    ethernet:
      - {driver: ovsdb, options: {switch: leaf-1, remote: "unix:/run/ovs/db.sock"}}
      - {driver: ssh, options: {switch: leaf-2, host: ..., dialect: nxos, ...}}

The quarantine VLAN has one source, ``config.yaml``'s ``segments.ethernet.quarantine_vlan``
(handed in as ``settings["quarantine_vlan"]``); a driver option that disagrees is refused.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Self

from gpufabric.domain.errors import ConfigError, ConflictError, ValidationError
from gpufabric.domain.fabric import DriverLookup, FabricKind, InvariantSpec, PortSeen, Tenancy
from gpufabric.domain.findings import Violation
from gpufabric.domain.models import Network, Node, PortKey, Segment
from gpufabric.domain.segments import IdRange, allocate
from gpufabric.domain.topology import path_json, tiers_above
from gpufabric.domain.values import PortNaming
from gpufabric.fabrics.ethernet.audit import bonds
from gpufabric.fabrics.ethernet.audit import isolation as eth_audit
from gpufabric.fabrics.ethernet.audit import slots as slot_audit
from gpufabric.fabrics.ethernet.backend import EthernetBackend, build_switches
from gpufabric.fabrics.ethernet.entries import (
    ENTRY_SCHEMA,
    KIND,
    SWITCH_PORT,
    EthernetPort,
    dump_ethernet,
    ethernet_keys,
    ethernet_ports,
    parse_ethernet,
)
from gpufabric.fabrics.ethernet.inventory import declared_uplinks
from gpufabric.fabrics.ethernet.plan import (
    EthernetPlan,
    EthState,
    desired_switches,
    diff_switches,
    merge_switches,
    settings_quarantine_vlan,
    tenants_seen,
)
from gpufabric.fabrics.ethernet.segments import EthernetSegments, vlan_of, vlan_segment
from gpufabric.fabrics.ethernet.site_check import ethernet_site_checks


class EthernetKind(FabricKind[EthState, EthState]):
    name = KIND
    order = 10  # first among the kinds
    ports_section = True
    inventory_key: ClassVar[str | None] = "ethernet"
    entry_schema: ClassVar[Mapping[str, Any] | None] = ENTRY_SCHEMA

    # ---- the kind's column of the inventory (:mod:`.entries`)
    def parse_ports(self, node: str, raw: Any, where: str) -> tuple[EthernetPort, ...]:
        return parse_ethernet(node, raw, where, self.__dict__.get("_namings"))

    def dump_ports(self, ports: tuple[Any, ...]) -> list[Any]:
        return dump_ethernet(ports)

    def port_keys(self, ports: tuple[Any, ...]) -> Iterable[PortKey]:
        return ethernet_keys(ports)

    def ports(self, node: Node) -> tuple[EthernetPort, ...]:
        return ethernet_ports(node, self.instance)

    def for_inventory(self, namings: Mapping[str, PortNaming]) -> Self:
        """This kind checking each port name against its switch's dialect (``namings``)."""
        other = copy.copy(self)
        other.__dict__["_namings"] = dict(namings)
        return other

    def listed_ports(self, node: Node, instances: Collection[str] = ()) -> Sequence[Mapping[str, Any]]:
        """Every NIC of ``node`` (the default instance's and ``instances``' own), once per switch
        port, with its ``path`` up the fabric (its leaf, then the uplinks this instance's
        fabrics.yaml section declares: :mod:`.inventory`)."""
        seen: dict[tuple[str, str], EthernetPort] = {}
        for instance in (KIND, *sorted(set(instances) - {KIND})):
            for p in ethernet_ports(node, instance):
                seen.setdefault((p.switch, p.switch_port), p)
        up = declared_uplinks(self.section)
        return [{**_port_json(p), "path": path_json(tiers_above(p.switch, up))}
                for p in sorted(seen.values(), key=lambda p: p.name)]  # fmt: skip

    def lookup_key(self, query: Mapping[str, str]) -> PortKey | None:
        """``switch`` and ``port``: that switch interface (a member port or an aggregate)."""
        switch, port = query.get("switch"), query.get("port")
        return PortKey(SWITCH_PORT, f"{switch}/{port}") if switch and port else None

    def port_namings(self, fabrics_yaml: Mapping[str, Any]) -> Mapping[str, PortNaming]:
        """switch -> the port naming of its CLI dialect (the ovsdb driver's: ``ovs``)."""
        from gpufabric.fabrics.ethernet.drivers.ssh.dialects import port_namings

        return port_namings(fabrics_yaml)

    def build(self, section: Any, drivers: DriverLookup, settings: Mapping[str, Any]) -> EthernetBackend:
        if not isinstance(section, list):
            raise ConfigError("ethernet", section, "a list of {driver, options} entries, one per switch")
        qv = settings_quarantine_vlan(settings)
        declared_uplinks(section)  # refused here, at load, not on a node's page
        switches, pool = build_switches(section, drivers, qv)
        return EthernetBackend(switches, pool=pool, instance=self.instance, site_checks=ethernet_site_checks)

    def segment_config(self, raw: Any, where: str) -> EthernetSegments:
        """``segments.ethernet``: the tenant VLAN pool and the quarantine VLAN (:mod:`.segments`)."""
        return EthernetSegments.from_dict(raw, where)

    def allocate(self, network: Network, used: Collection[Segment], config: Any) -> Segment | None:
        mine: EthernetSegments = config.of(EthernetSegments)
        taken = {vlan_of(s) for s in used}
        r = mine.vlans
        vlan = allocate(range(r.start, r.end + 1), taken, mine.field("vlan_range"))
        return vlan_segment(self.instance, vlan)

    def adopt(self, network: Network, seg_id: int, used: Collection[Segment], config: Any) -> Segment:
        """VLAN ``seg_id`` (of the tenant VLAN pool, free on every Ethernet instance)."""
        vlans: IdRange = config.of(EthernetSegments).vlans
        if seg_id not in vlans:
            raise ValidationError(f"segments.{self.instance}.seg_id", seg_id, str(vlans))
        if seg_id in {vlan_of(s) for s in used}:
            raise ConflictError(f"{self.instance} segment {seg_id} is already used", field="segments", value=seg_id)
        return vlan_segment(self.instance, seg_id)

    def segment_label(self, segment: Segment) -> str:
        return f"vlan {vlan_of(segment)}"

    def segment_view(self, segment: Segment) -> Mapping[str, Any]:
        return {"vlan": vlan_of(segment)}

    def desired(self, tenancy: Tenancy) -> EthState:
        return desired_switches(tenancy, self.instance)

    def diff(self, desired: EthState, observed: EthState) -> EthernetPlan:
        return diff_switches(desired, observed)

    def as_observed(self, desired: EthState) -> EthState:
        return desired

    def empty_state(self) -> EthState:
        return ()

    def merge(self, observed: EthState, read_back: EthState) -> EthState:
        return merge_switches(observed, read_back)

    def tenants_seen(self, observed: EthState, tenancy: Tenancy) -> Mapping[str, frozenset[str]]:
        return tenants_seen(observed, tenancy, settings_quarantine_vlan(tenancy.settings), self.instance)

    # ---- slots of a shared host (issue 33): a slot's VM ports are its host's entries with its GPUs
    def check_slot(self, host: Node, modules: frozenset[int]) -> None:
        """Refuse a slot holding a GPU without a VM port when ``host`` has VM ports (entries with
        ``gpu``) on this instance: that VM would have no isolated port. A host without any (its VMs'
        ports elsewhere, e.g. on a DPU) is accepted."""
        vm: set[int] = {p.gpu for p in self.ports(host) if p.gpu is not None}
        missing = sorted(modules - vm)
        if vm and missing:
            raise ValidationError("gpus", sorted(modules), f"GPUs with a VM port on {host.name} ({_ranges(vm)})",
                                  f"GPU(s) {', '.join(map(str, missing))} have no {self.instance} VM port (an entry with gpu)")  # fmt: skip

    # ---- audit (:mod:`.audit.isolation`, bonds: :mod:`.audit.bonds`)
    def invariants(self) -> tuple[InvariantSpec, ...]:
        return (*eth_audit.INVARIANTS, *bonds.INVARIANTS, *slot_audit.INVARIANTS)

    def audit(self, tenancy: Tenancy, desired: EthState | None, observed: EthState) -> Iterable[Violation]:
        return [*eth_audit.EthAudit.build(tenancy, desired, observed, self.instance).violations(),
                *bonds.audit(tenancy, observed, self.instance), *slot_audit.audit(tenancy, observed, self.instance)]

    def ports_seen(self, observed: EthState, tenancy: Tenancy) -> Iterable[PortSeen]:
        return eth_audit.ports_seen(tenancy, observed, self.instance)

    # ---- display
    def slot_vm_ports(self, node: Node, tenancy: Tenancy | None) -> tuple[EthernetPort, ...]:
        """A slot's VM ports: its host's entries with its GPUs (none without a ``tenancy`` to find the host in)."""
        if not node.host or tenancy is None:
            return ()
        host = next((n for n in tenancy.nodes if n.name == node.host), None)
        return tuple(p for p in self.ports(host) if p.gpu in node.slot_modules) if host is not None else ()

    def summary(self, node: Node, tenancy: Tenancy | None = None) -> str:
        ports = self.ports(node) or self.slot_vm_ports(node, tenancy)
        return "\n".join(f"{p.switch}/{p.switch_port}" + (f" ({p.bond})" if p.bond else "") for p in ports)

    def node_view(self, node: Node, tenancy: Tenancy | None = None) -> Mapping[str, Any]:
        vm = self.slot_vm_ports(node, tenancy)
        return {"ports": [_port_json(p) for p in self.ports(node)], **({"vm_ports": [_port_json(p) for p in vm]} if vm else {})}


def _ranges(mods: set[int]) -> str:
    return ", ".join(str(m) for m in sorted(mods))


def _port_json(p: EthernetPort) -> dict[str, Any]:
    """One NIC as the API shows it (``mac`` always; ``bond``/``bond_mode`` when bonded)."""
    return {"name": p.name, "switch": p.switch, "switch_port": p.switch_port, "mac": p.mac,
            **({"bond": p.bond, "bond_mode": p.bond_mode} if p.bond else {}),
            **({"gpu": p.gpu} if p.gpu is not None else {})}  # fmt: skip
