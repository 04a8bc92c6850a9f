"""The Ethernet fabric on the seam: VLAN allocation, desired ports, diff, and the backend
that drives every switch of ``fabrics.yaml``'s ``ethernet:`` list in parallel (one
transaction/session per switch) and returns the verified read-back of the ports it set.

``fabrics.yaml``::

    ethernet:
      - {driver: ovsdb, options: {switch: leaf-1, remote: "unix:/run/ovs/db.sock"}}
      - {driver: ssh, options: {switch: leaf-2, host: ..., dialect: nxos, ...}}

The quarantine VLAN has one source, ``config.yaml``'s ``segments.ethernet.quarantine_vlan``
(handed in as ``settings["quarantine_vlan"]``); a driver option that disagrees is refused.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Self

from gpufabric.domain.errors import ConfigError, ConflictError, ValidationError, VerifyError
from gpufabric.domain.fabric import (
    DriverLookup,
    FabricBackend,
    FabricKind,
    FabricPlan,
    InvariantSpec,
    PortSeen,
    Tenancy,
    build_driver,
)
from gpufabric.domain.findings import Violation
from gpufabric.domain.models import Network, Node, PortKey, Segment
from gpufabric.domain.segments import IdRange, allocate
from gpufabric.domain.site_check import SiteCheck, SiteContext
from gpufabric.domain.topology import path_json, tiers_above
from gpufabric.domain.values import PortNaming
from gpufabric.fabrics.ethernet import audit as eth_audit
from gpufabric.fabrics.ethernet import bonds
from gpufabric.fabrics.ethernet.driver import EthernetSwitchDriver
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
from gpufabric.fabrics.ethernet.ovsdb_pool import OvsdbPool
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
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, SwitchState
from gpufabric.fabrics.ethernet.uplinks import declared_uplinks
from gpufabric.transport.parallel import run_parallel
from gpufabric.transport.secrets import TransportNote


class EthernetBackend(FabricBackend[EthState]):
    """Every configured switch; observed and applied in parallel, one thread per switch."""

    capabilities = frozenset({"observe", "apply"})

    def __init__(
        self, switches: Mapping[str, EthernetSwitchDriver], verify_timeout: float = 10.0, pool: OvsdbPool | None = None,
        instance: str = KIND,
    ) -> None:
        self.switches = dict(switches)
        self.instance = instance  # the fabric instance it drives (whose inventory ports its site check reads)
        self.verify_timeout = verify_timeout
        self.pool = pool  # the OVSDB connections the switches share (closed with the backend)

    def observe(self) -> EthState:
        return tuple(s for s in run_parallel({n: d.observe for n, d in self.switches.items()}).values())

    def apply(self, plan: FabricPlan) -> EthState:
        assert isinstance(plan, EthernetPlan)
        work = plan.by_switch()
        for name in work:
            if name not in self.switches:
                raise ConfigError("switch", name, f"a switch in fabrics.yaml ({', '.join(sorted(self.switches))})")
        jobs = {n: (lambda d=self.switches[n], ps=ps: self._apply_one(d, ps)) for n, ps in work.items()}
        return tuple(run_parallel(jobs).values())

    def _apply_one(self, drv: EthernetSwitchDriver, ports: Sequence[EthernetPortConfig]) -> SwitchState:
        """Apply, then read the switch back until it holds ``ports`` (the verified read-back; a
        member put back in its aggregate must also be read in it)."""
        drv.apply(ports)
        deadline = time.monotonic() + self.verify_timeout
        want = {p.port: p for p in ports}
        while True:
            seen = drv.observe()
            got = tuple(p for p in seen.ports if p.port in want)
            if {p.port: p for p in got} == want and all(_joined(seen, w) for w in want.values()):
                return SwitchState(drv.switch, tuple(sorted(got)))
            if time.monotonic() > deadline:
                bad = [str(w) for k, w in want.items() if seen.port(k) != w or not _joined(seen, w)]
                raise VerifyError(
                    f"{drv.switch}: {len(bad)} port(s) not as applied after {self.verify_timeout}s",
                    fabric="ethernet",
                    device=drv.switch,
                    mismatches=bad[:20],
                )
            time.sleep(0.05)

    def site_checks(self, context: SiteContext) -> Sequence[SiteCheck]:
        return ethernet_site_checks(self.switches, context, self.instance)

    def transport_notes(self) -> tuple[TransportNote, ...]:
        """What every switch driver reports about its own transport (audit ``TRANSPORT-INSECURE``)."""
        out: list[TransportNote] = []
        for d in self.switches.values():
            notes = getattr(d, "transport_notes", None)
            out += notes() if callable(notes) else ()
        return tuple(out)

    def close(self) -> None:
        for d in self.switches.values():
            close = getattr(d, "close", None)
            if callable(close):
                close()
        if self.pool is not None:
            self.pool.close()


def _joined(seen: SwitchState, want: EthernetPortConfig) -> bool:
    """A member put back (``want.bond``) is read in that aggregate: equality leaves ``bond`` out."""
    got = seen.port(want.port)
    return not want.bond or (got is not None and bonds.same_aggregate(got.bond, want.bond))


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
        fabrics.yaml section declares: :mod:`.uplinks`)."""
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
        from gpufabric.fabrics.ethernet.dialects import port_namings

        return port_namings(fabrics_yaml)

    def build(self, section: Any, drivers: DriverLookup, settings: Mapping[str, Any]) -> EthernetBackend:
        if not isinstance(section, list):
            raise ConfigError("ethernet", section, "a list of {driver, options} entries, one per switch")
        qv = settings_quarantine_vlan(settings)
        declared_uplinks(section)  # refused here, at load, not on a node's page
        switches: dict[str, EthernetSwitchDriver] = {}
        pool = OvsdbPool()  # one OVSDB connection per database server, shared by its bridges
        for i, entry in enumerate(section):
            drv = build_driver(
                drivers, f"ethernet[{i}]", entry, {}, {"quarantine_vlan": qv, "pool": pool},
                expect=(EthernetSwitchDriver, "an Ethernet switch driver"),
            )  # fmt: skip
            assert isinstance(drv, EthernetSwitchDriver)
            if drv.switch in switches:
                raise ConfigError(f"ethernet[{i}].options.switch", drv.switch, "each switch once")
            switches[drv.switch] = drv
        return EthernetBackend(switches, pool=pool, instance=self.instance)

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

    # ---- audit (:mod:`.audit`, bonds: :mod:`.bonds`)
    def invariants(self) -> tuple[InvariantSpec, ...]:
        return (*eth_audit.INVARIANTS, *bonds.INVARIANTS)

    def audit(self, tenancy: Tenancy, desired: EthState | None, observed: EthState) -> Iterable[Violation]:
        return [*eth_audit.EthAudit.build(tenancy, desired, observed, self.instance).violations(),
                *bonds.audit(tenancy, observed, self.instance)]

    def ports_seen(self, observed: EthState, tenancy: Tenancy) -> Iterable[PortSeen]:
        return eth_audit.ports_seen(tenancy, observed, self.instance)

    # ---- display
    def summary(self, node: Node, tenancy: Tenancy | None = None) -> str:
        return "\n".join(f"{p.switch}/{p.switch_port}" + (f" ({p.bond})" if p.bond else "") for p in self.ports(node))

    def node_view(self, node: Node, tenancy: Tenancy | None = None) -> Mapping[str, Any]:
        return {"ports": [_port_json(p) for p in self.ports(node)]}


def _port_json(p: EthernetPort) -> dict[str, str]:
    """One NIC as the API shows it (``mac`` always; ``bond``/``bond_mode`` when bonded)."""
    return {"name": p.name, "switch": p.switch, "switch_port": p.switch_port, "mac": p.mac,
            **({"bond": p.bond, "bond_mode": p.bond_mode} if p.bond else {})}  # fmt: skip
