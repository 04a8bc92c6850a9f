"""Ethernet isolation invariants (pure), checked on the *observed* switch port configurations:
``ETH-VLAN-SHARED``, ``ETH-UNLEASED-NOT-QUARANTINED``, ``ETH-TRUNK-FOREIGN-VLAN``, ``ETH-VLAN1``,
the Ethernet part of ``X-DRIFT`` and the ports the audit's ``X-NODE-SPLIT`` compares.

A port's tenant is the tenant of the node cabled to it (its owner in the ``Tenancy``: its
lease, else quarantine). A VLAN's owners are the tenants whose networks use it (an Ethernet
segment's VLAN is ``vlan``, else ``seg_id``; the quarantine VLAN is owned by quarantine).
Ports that no inventory node is cabled to (uplinks, spare ports) only take part in ``ETH-VLAN1``.
On a shared host (issue 33) a VM port's tenant is its GPU's slot's (quarantine when no slot holds
it) and the host's uplinks, which carry every slot's VLANs by design, are checked by
:mod:`.slots` instead of ``ETH-VLAN-SHARED`` / ``ETH-TRUNK-FOREIGN-VLAN``.
:class:`EthAudit` builds its lookups once so that every check is linear in the input.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpufabric.domain.fabric import InvariantSpec, PortSeen, Tenancy
from gpufabric.domain.findings import DRIFT, Violation
from gpufabric.domain.models import QUARANTINE
from gpufabric.domain.severity import Severity
from gpufabric.fabrics.ethernet.entries import KIND, EthernetPort, ethernet_ports
from gpufabric.fabrics.ethernet.plan import as_seen, seen_as, settings_quarantine_vlan
from gpufabric.fabrics.ethernet.segments import vlan_of
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState

ETH: Final = KIND

INVARIANTS: Final = (
    InvariantSpec("ETH-VLAN-SHARED", Severity.CRITICAL.value,
                  "A VLAN is carried by switch ports of nodes of two or more tenants (quarantine counts as one)."),
    InvariantSpec("ETH-UNLEASED-NOT-QUARANTINED", Severity.HIGH.value,
                  "A node without an active lease has a switch port neither shut down nor carrying exactly the quarantine VLAN."),
    InvariantSpec("ETH-TRUNK-FOREIGN-VLAN", Severity.CRITICAL.value,
                  "A trunk port of a node carries (native or tagged) a VLAN that the node's tenant does not own."),
    InvariantSpec("ETH-VLAN1", Severity.HIGH.value, "A managed switch port carries VLAN 1 (access, native or tagged)."),
)  # fmt: skip

EthKey = tuple[str, str]
EthRow = tuple[EthKey, EthernetPortConfig, frozenset[int], str, str]
"""(key, config, VLANs carried, node, tenant) of one observed switch port; node and
tenant are "" when no inventory node is cabled to the port."""

_UNOWNED: Final = frozenset({"(unowned)"})
_SEVERITY: Final = {**{s.id: Severity(s.severity) for s in INVARIANTS}, DRIFT: Severity.MEDIUM}


def _v(inv: str, message: str, device: str, port: str, node: str = "", tenants: tuple[str, ...] = (),
       resource: str = "") -> Violation:  # fmt: skip
    return Violation(inv, _SEVERITY[inv], message, ETH, device, port, node, tenants, resource)


def eth_place(key: EthKey) -> str:
    """``switch/port`` as printed in messages."""
    return f"{key[0]}/{key[1]}"


def fmt_vlans(vlans: Iterable[int]) -> str:
    return ",".join(str(v) for v in sorted(vlans))


def describe_eth(c: EthernetPortConfig) -> str:
    """A port configuration as one short phrase, e.g. ``access vlan 2001`` or ``trunk native 1 tagged 5,6``."""
    if c.mode is PortMode.SHUTDOWN:
        return "shutdown"
    if c.mode is PortMode.ACCESS:
        return f"access vlan {c.vlan.value if c.vlan else 'none'}"
    native = f" native {c.vlan.value}" if c.vlan else ""
    tagged = fmt_vlans(v.value for v in c.trunks) or "none"
    return f"trunk{native} tagged {tagged}"


@dataclass(frozen=True)
class EthAudit:
    """The lookups of one audit: (switch, port) -> inventory port, node -> tenant, VLAN ->
    owning tenants, and the observed/desired configuration of each port."""

    tenancy: Tenancy
    eth_ports: Mapping[EthKey, EthernetPort]
    tenant: Mapping[str, str]
    vlan_owners: Mapping[int, frozenset[str]]
    observed: Mapping[EthKey, EthernetPortConfig]
    columns: tuple[tuple[Any, ...], ...]  # EthRow fields, one tuple per field (see rows)
    vlans: Mapping[EthKey, frozenset[int]]
    desired: Mapping[EthKey, EthernetPortConfig] | None
    quarantine_vlan: int
    instance: str = ETH
    shared_uplinks: frozenset[EthKey] = frozenset()  # a shared host's uplinks (checked by .slots)

    @classmethod
    def build(
        cls, tenancy: Tenancy, desired: Iterable[SwitchState] | None, observed: Iterable[SwitchState], instance: str = ETH
    ) -> EthAudit:
        eth = {(p.switch, p.managed_port): p for n in tenancy.nodes for p in ethernet_ports(n, instance)}  # a bond: its aggregate
        tenant = {n.name: tenancy.owner(n.name) for n in tenancy.nodes}
        qv = settings_quarantine_vlan(tenancy.settings)
        obs = {(c.switch, c.port): c for s in observed for c in s.ports}
        columns = _columns(obs, eth, _seen(tenancy, eth))
        return cls(
            tenancy=tenancy,
            eth_ports=eth,
            tenant=tenant,
            vlan_owners=vlan_owner_sets(tenancy, instance),
            observed=obs,
            columns=columns,
            vlans=dict(zip(columns[0], columns[2], strict=True)),
            desired=None if desired is None else {(c.switch, c.port): c for s in desired for c in s.ports},
            quarantine_vlan=qv,
            instance=instance,
            shared_uplinks=frozenset(k for k, p in eth.items() if p.gpu is None and tenancy.shared(p.node)),
        )

    def owner_set(self, vlan: int) -> frozenset[str]:
        return self.vlan_owners.get(vlan, _UNOWNED)

    def rows(self) -> Iterator[EthRow]:
        """Every observed switch port as an ``EthRow`` (columns zipped on the fly: few objects)."""
        return zip(*self.columns, strict=True)

    def violations(self) -> Iterator[Violation]:
        for check in (vlan_shared, unleased_not_quarantined, trunk_foreign_vlan, vlan1, drift):
            yield from check(self)


def vlan_owner_sets(tenancy: Tenancy, instance: str = ETH) -> dict[int, frozenset[str]]:
    """VLAN -> the tenants whose networks use it on ``instance`` (the quarantine VLAN: quarantine)."""
    owners: dict[int, set[str]] = {settings_quarantine_vlan(tenancy.settings): {QUARANTINE}}
    for net in tenancy.networks.values():
        for seg in net.segments:
            if seg.fabric == instance:
                owners.setdefault(vlan_of(seg), set()).add(net.tenant)
    return {k: frozenset(v) for k, v in owners.items()}


def _seen(tenancy: Tenancy, eth: Mapping[EthKey, EthernetPort]) -> Mapping[EthKey, tuple[str, str]]:
    """(node, tenant) each inventory port is counted for (:func:`~..plan.seen_as`: a VM port of a
    shared host, its GPU's slot; quarantine when no slot holds it)."""
    out = {}
    for key, p in eth.items():
        node = seen_as(tenancy, p)[0] if p.gpu is not None else p.node
        out[key] = (node, tenancy.owner(node)) if node is not None else (p.node, QUARANTINE)
    return out


def ports_seen(tenancy: Tenancy, observed: Iterable[SwitchState], instance: str = ETH) -> Iterator[PortSeen]:
    """Every observed port cabled to an inventory node, with the owners of its VLANs (ports
    whose VLANs nobody owns, shut-down ports, left out). A shared host's VM port is its GPU's
    slot's (left out when no slot holds it); on its uplinks the VLANs of the host's and its live
    slots' tenants count as the host's tenant."""
    owners = vlan_owner_sets(tenancy, instance)
    where = {(p.switch, p.managed_port): p for n in tenancy.nodes for p in ethernet_ports(n, instance)}
    memo: dict[frozenset[int], frozenset[str]] = {}
    for s in observed:
        for c in s.ports:
            p = where.get((c.switch, c.port))
            if p is None:
                continue
            node, own = seen_as(tenancy, p)
            if node is None:
                continue
            vlans = c.vlans()
            eff = memo.get(vlans)
            if eff is None:
                eff = memo[vlans] = frozenset(o for v in vlans for o in owners.get(v, ()))
            if own:
                eff = frozenset(as_seen(eff, tenancy.owner(node), own))
            if eff:
                yield PortSeen(node, ETH, c.switch, c.port, eff, "/")


def _columns(
    observed: Mapping[EthKey, EthernetPortConfig], eth: Mapping[EthKey, EthernetPort], seen: Mapping[EthKey, tuple[str, str]]
) -> tuple[tuple[Any, ...], ...]:
    keys, cfgs, vlans, nodes, tenants = [], [], [], [], []
    memo: dict[frozenset[int], frozenset[int]] = {}
    for key, cfg in observed.items():
        p = eth.get(key)
        v = cfg.vlans()
        keys.append(key)
        cfgs.append(cfg)
        vlans.append(memo.setdefault(v, v))  # share equal sets
        node, tenant = seen[key] if p else ("", "")
        nodes.append(node)
        tenants.append(tenant)
    return tuple(keys), tuple(cfgs), tuple(vlans), tuple(nodes), tuple(tenants)


def vlan_shared(a: EthAudit) -> Iterator[Violation]:
    """ETH-VLAN-SHARED: a VLAN carried by ports of nodes of two or more tenants.

    Flags every port on such a VLAN whose tenant does not own the VLAN (all of its
    ports when none of the tenants present owns it).
    """
    by_vlan: dict[int, list[EthRow]] = {}
    for row in a.rows():
        if row[3] and row[0] not in a.shared_uplinks:
            for vlan in row[2]:
                by_vlan.setdefault(vlan, []).append(row)
    for vlan, members in by_vlan.items():
        tenants = {m[4] for m in members}
        if len(tenants) < 2:
            continue
        rightful = a.vlan_owners.get(vlan, frozenset()) & tenants
        for key, _, _, node, tenant in members:
            if tenant in rightful:
                continue
            others = ", ".join(sorted(tenants - {tenant}))
            yield _v("ETH-VLAN-SHARED",
                     f"vlan {vlan} on {eth_place(key)} (node {node}, tenant {tenant}) is shared with tenant(s) {others}",
                     key[0], key[1], node, tuple(sorted(tenants)), f"vlan:{vlan}")  # fmt: skip


def unleased_not_quarantined(a: EthAudit) -> Iterator[Violation]:
    """ETH-UNLEASED-NOT-QUARANTINED: a node without an active lease has a port that is
    neither shut down nor carrying exactly the quarantine VLAN."""
    quarantine = frozenset({a.quarantine_vlan})
    for node in a.tenancy.nodes:
        if a.tenancy.owners.get(node.name) is not None:
            continue
        for p in {(p.switch, p.managed_port): p for p in ethernet_ports(node, a.instance)}.values():  # a bond's members: once
            key = (p.switch, p.managed_port)
            cfg = a.observed.get(key)
            if cfg is None or cfg.mode is PortMode.SHUTDOWN:
                continue  # an unobserved port is reported by X-DRIFT
            vlans = a.vlans[key]
            if vlans == quarantine:
                continue
            yield _v("ETH-UNLEASED-NOT-QUARANTINED",
                     f"unleased node {node.name}: {eth_place(key)} is {describe_eth(cfg)}, "
                     f"not quarantine vlan {a.quarantine_vlan}",
                     p.switch, p.managed_port, node.name, resource=f"vlan:{fmt_vlans(vlans)}" if vlans else "")  # fmt: skip


def trunk_foreign_vlan(a: EthAudit) -> Iterator[Violation]:
    """ETH-TRUNK-FOREIGN-VLAN: a trunk port of a node carries (native or tagged) a VLAN
    its node's tenant does not own."""
    for key, cfg, vlans, node, tenant in a.rows():
        if cfg.mode is not PortMode.TRUNK or not node or key in a.shared_uplinks:
            continue
        foreign = [v for v in vlans if tenant not in a.owner_set(v)]
        if not foreign:
            continue
        owners = sorted({o for v in foreign for o in a.owner_set(v)})
        yield _v("ETH-TRUNK-FOREIGN-VLAN",
                 f"trunk {eth_place(key)} (node {node}, tenant {tenant}) carries vlan(s) {fmt_vlans(foreign)} "
                 f"owned by {', '.join(owners)}",
                 key[0], key[1], node, tuple(sorted({tenant, *owners})), f"vlan:{fmt_vlans(foreign)}")  # fmt: skip


def vlan1(a: EthAudit) -> Iterator[Violation]:
    """ETH-VLAN1: a managed port carries VLAN 1 (access, native or tagged)."""
    for key, cfg, vlans, node, _ in a.rows():
        if 1 not in vlans:
            continue
        who = f" (node {node})" if node else ""
        yield _v("ETH-VLAN1", f"{eth_place(key)}{who} carries vlan 1: {describe_eth(cfg)}", key[0], key[1], node,
                 resource="vlan:1")  # fmt: skip


def _same(a: EthernetPortConfig, b: EthernetPortConfig) -> bool:
    if a.mode is not b.mode:
        return False
    if a.mode is PortMode.SHUTDOWN:
        return True
    return a.vlan == b.vlan and frozenset(a.trunks) == frozenset(b.trunks)


def drift(a: EthAudit) -> Iterator[Violation]:
    """X-DRIFT (Ethernet part): an inventory (or desired) port missing from the observed
    state, or observed otherwise than desired (trunk VLAN order ignored)."""
    keys: set[EthKey] = set(a.eth_ports)
    if a.desired is not None:
        keys.update(a.desired)
    for key in keys:
        port = a.eth_ports.get(key)
        node = port.node if port else ""
        on = f" (node {node})" if node else ""
        obs = a.observed.get(key)
        want = a.desired.get(key) if a.desired is not None else None
        if obs is None:
            msg = f"{eth_place(key)}{on} is not in the observed state"
            if want is not None:
                msg += f" (desired {describe_eth(want)})"
        elif a.desired is None:
            continue
        elif want is None:
            msg = f"{eth_place(key)}{on} has no desired configuration; observed {describe_eth(obs)}"
        elif want is not obs and want != obs and not _same(want, obs):
            msg = f"{eth_place(key)}{on}: desired {describe_eth(want)}, observed {describe_eth(obs)}"
        else:
            continue
        yield _v(DRIFT, msg, key[0], key[1], node)
