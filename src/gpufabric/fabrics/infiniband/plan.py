"""InfiniBand's desired slice, pure diff and plan: PKey tables of the managed CA ports.

The desired slice is the partition layout plus every managed port GUID (a quarantined port
is in no tenant partition, so the layout alone does not name it). The expected table of a
port has one source, :func:`partitions.entries_by_port` (also used by the OpenSM driver's
verification): the diff compares it with the port's real table, entry by entry, so a host
that is a *full* member of the default partition is drift like any other.

Partition names are derived from the PKey (``pk_0a00``), never from user names.

Every function is per fabric *instance* (one IB subnet): a node's ports on it are its
:class:`IbPort` rows whose ``instance`` names it (:func:`instance_ports`; an empty name is the
default instance, named after the kind), and a network's PKey there is its segment on that
instance (``network.segment(instance)``).

On a shared host (issue 33, ``tenancy.shared(host)``) a port follows the GPU whose rail it is
(:func:`port_unit`): an HCA port with ``gpu: m`` carries the PKeys of ``tenancy.gpu_lease(host, m)``'s
networks (none: quarantine), an HCA port without affinity is in quarantine (the hypervisor holds
no tenant PKey). So a slot's move changes only its own HCAs' tables. Other hosts: the host's lease.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from gpufabric.domain.fabric import FabricPlan, Tenancy
from gpufabric.domain.models import QUARANTINE, Network, Node
from gpufabric.domain.slots import is_shared
from gpufabric.domain.values import DEFAULT_PKEY, Guid, Membership, PKey
from gpufabric.fabrics.infiniband.entries import KIND, IbPort, ib_ports
from gpufabric.fabrics.infiniband.segments import segment_pkey
from gpufabric.fabrics.infiniband.state import IbFabricState, Partition, PartitionLayout, PartitionMember, PkeyTable
from gpufabric.fabrics.infiniband.state.partitions import entries_by_port

DEFAULT_INSTANCE = KIND  # the default instance's name (stored segments and ports keep it)
instance_ports = ib_ports  # a node's HCA ports on one IB instance (subnet)


@dataclass(frozen=True)
class IbDesired:
    layout: PartitionLayout
    guids: tuple[Guid, ...]  # every managed port (inventory CA ports and the SM's)


def pkey_partition_name(pkey: PKey | int) -> str:
    """The partition name of a PKey: OpenSM-safe, unique, independent of user names."""
    v = pkey.value if isinstance(pkey, PKey) else pkey
    return f"pk_{v & 0x7FFF:04x}"


class PkeyAction(enum.StrEnum):
    REMOVE = "remove"
    ADD = "add"


@dataclass(frozen=True, order=True)
class PkeyChange:
    action: PkeyAction
    entry: int  # the 16-bit table entry (bit 15: full member)
    guid: Guid

    @property
    def pkey(self) -> int:
        return self.entry & 0x7FFF

    def __str__(self) -> str:
        member = "full" if self.entry & 0x8000 else "limited"
        return f"infiniband pkey 0x{self.pkey:04x}: {self.action.value} {member} member {self.guid}"


def _value(g: Guid) -> int:
    """Sort key of distinct GUIDs: the same order as Guid's own, without a Python __lt__ per comparison."""
    return g.value


def expected_tables(layout: PartitionLayout, guids: Iterable[Guid]) -> dict[Guid, frozenset[int]]:
    """The table each port should hold under ``layout``."""
    by_port = entries_by_port(layout)
    default = frozenset({DEFAULT_PKEY} if layout.default_limited_all else ())
    return {g: by_port.get(g, default) for g in guids}


@dataclass(frozen=True)
class IbPlan(FabricPlan):
    fabric = "infiniband"
    changes: tuple[PkeyChange, ...] = ()
    layout: PartitionLayout | None = None  # the layout the SM is handed when ``changes`` is not empty

    @property
    def empty(self) -> bool:
        return not self.changes

    def lines(self) -> list[str]:
        return [str(c) for c in self.changes]

    def __len__(self) -> int:
        return len(self.changes)  # one line per change, without formatting them

    def to_dict(self) -> list[dict[str, str]]:
        return [
            {"action": c.action.value, "pkey": f"0x{c.pkey:04x}", "full": str(bool(c.entry & 0x8000)).lower(), "guid": str(c.guid)}
            for c in self.changes
        ]

    def split(self) -> tuple[IbPlan, IbPlan]:
        removals = tuple(c for c in self.changes if c.action is PkeyAction.REMOVE)
        additions = tuple(c for c in self.changes if c.action is PkeyAction.ADD)
        if not removals or self.layout is None:
            return IbPlan(), self
        if not additions:
            return self, IbPlan()
        return IbPlan(removals, _without(self.layout, additions)), IbPlan(additions, self.layout)


def _without(layout: PartitionLayout, additions: Iterable[PkeyChange]) -> PartitionLayout:
    """``layout`` less the memberships ``additions`` would grant: what removing alone leaves."""
    grant = {(c.guid, c.pkey) for c in additions}
    parts = []
    for p in layout.partitions:
        members = tuple(m for m in p.members if (m.guid, p.pkey.value & 0x7FFF) not in grant)
        if members:
            parts.append(dataclasses.replace(p, members=members))
    return dataclasses.replace(layout, partitions=tuple(parts))


def shared_hosts(tenancy: Tenancy) -> frozenset[str]:
    """The nodes ``tenancy.shared`` answers True for, in one pass (each offering judged once)."""
    offerings = {name for name, o in tenancy.offerings.items() if is_shared(o)}
    if not offerings:
        return frozenset()
    return frozenset(n for n, lease in tenancy.owners.items() if lease is not None and lease.offering in offerings)


def port_unit(tenancy: Tenancy, port: IbPort) -> str | None:
    """The node whose lease governs ``port`` (an HCA port of host ``port.node``): the host itself,
    except on a shared host, where it is the slot holding the port's GPU (``tenancy.gpu_unit``);
    None (quarantine) for a port of a shared host without GPU affinity or whose GPU no slot holds."""
    if not tenancy.shared(port.node):
        return port.node
    return tenancy.gpu_unit(port.node, port.gpu) if port.gpu is not None else None


def port_groups(
    tenancy: Tenancy, node: Node, ports: tuple[IbPort, ...], shared: frozenset[str]
) -> Iterator[tuple[tuple[Network, ...], tuple[IbPort, ...]]]:
    """``node``'s ``ports`` grouped by the networks they carry: all of them with the node's lease's
    networks, or on a shared host (in ``shared``, :func:`shared_hosts`) each with its own
    (:func:`port_unit`; none in quarantine)."""
    if node.name not in shared:
        yield tenancy.lease_networks(node.name), ports
        return
    for p in ports:
        unit = port_unit(tenancy, p)
        yield (tenancy.lease_networks(unit) if unit is not None else ()), (p,)


def desired_ib(tenancy: Tenancy, sm_port_guids: Iterable[Guid], instance: str = DEFAULT_INSTANCE) -> IbDesired:
    members: dict[int, set[Guid]] = {}
    pkeys: dict[int, PKey] = {}
    opts: dict[int, dict[str, int | bool]] = {}  # the network's own IPoIB settings (Segment.options)
    guids: list[Guid] = []
    shared = shared_hosts(tenancy)
    for node in tenancy.nodes:
        ports = instance_ports(node, instance)
        if not ports:
            continue
        guids += [p.port_guid for p in ports]
        for nets, group in port_groups(tenancy, node, ports, shared):
            for net in nets:
                seg = net.segment(instance)
                if seg is None or (pk := segment_pkey(seg)) is None:
                    continue
                k = pk.value & 0x7FFF
                pkeys[k] = pk
                opts[k] = dict(seg.options)
                members.setdefault(k, set()).update(p.port_guid for p in group)
    parts = tuple(
        Partition(
            pkey_partition_name(k),
            pkeys[k].with_membership(Membership.FULL),
            tuple(PartitionMember(g, Membership.FULL) for g in sorted(members[k], key=_value)),
            # OpenSM creates the broadcast group only then: IPoIB on the tenant PKey needs it (unless
            # the network asked for none); its mtu/rate/sl/scope over the subnet's
            ipoib=opts[k].get("ipoib", True) is not False,
            qos=tuple((o, int(v)) for o, v in sorted(opts[k].items()) if o != "ipoib"),
        )
        for k in sorted(members)
        if members[k]
    )
    sm = tuple(sorted(set(sm_port_guids), key=_value))
    return IbDesired(PartitionLayout(parts, sm), tuple(sorted(set(guids) | set(sm), key=_value)))


def reachable(desired: IbDesired, observed: IbFabricState) -> IbDesired:
    """``desired`` without ports the fabric does not show (link down, port disabled after a
    rogue SM was contained): an SM cannot program them; they rejoin once seen again. The SM
    ports (``sm_port_guids``, deployment-wide) are kept only where seen: another subnet's SM
    is no port of this one. An unobserved subnet (no tables at all) leaves it unchanged."""
    if not observed.tables:
        return desired
    seen = {t.port_guid for t in observed.tables}
    parts = tuple(
        dataclasses.replace(p, members=tuple(m for m in p.members if m.guid in seen)) for p in desired.layout.partitions
    )
    full = tuple(g for g in desired.layout.default_full if g in seen)
    layout = dataclasses.replace(desired.layout, partitions=tuple(p for p in parts if p.members), default_full=full)
    return IbDesired(layout, tuple(g for g in desired.guids if g in seen))


def diff_ib(desired: IbDesired, observed: IbFabricState) -> IbPlan:
    d = reachable(desired, observed)
    want = expected_tables(d.layout, d.guids)
    changes: list[PkeyChange] = []
    for g in d.guids:
        t = observed.table(g)
        have = frozenset(t.entries) if t is not None else frozenset()
        target = want[g]
        changes += [PkeyChange(PkeyAction.REMOVE, e, g) for e in have - target]
        changes += [PkeyChange(PkeyAction.ADD, e, g) for e in target - have]
    if not changes:
        return IbPlan()
    ordered = sorted(changes, key=lambda c: (c.action is PkeyAction.ADD, c.pkey, c.guid.value, c.entry))
    return IbPlan(tuple(ordered), d.layout)


def as_observed_ib(desired: IbDesired) -> IbFabricState:
    want = expected_tables(desired.layout, desired.guids)
    return IbFabricState(tables=tuple(PkeyTable(g, tuple(sorted(want[g]))) for g in desired.guids))


def merge_ib(observed: IbFabricState, read_back: IbFabricState) -> IbFabricState:
    """``observed`` with the tables of ``read_back`` replaced (SMs and settings kept)."""
    tables = {t.port_guid: t for t in observed.tables}
    for t in read_back.tables:
        old = tables.get(t.port_guid)
        tables[t.port_guid] = dataclasses.replace(t, capacity=t.capacity or (old.capacity if old else 0), lid=t.lid or (old.lid if old else 0))
    return dataclasses.replace(observed, tables=tuple(tables[g] for g in sorted(tables, key=_value)))


def pkey_owners(tenancy: Tenancy, instance: str = DEFAULT_INSTANCE) -> Mapping[int, str]:
    out: dict[int, str] = {}
    for net in tenancy.networks.values():
        seg = net.segment(instance)
        if seg is not None and (pk := segment_pkey(seg)) is not None:
            out[pk.value & 0x7FFF] = net.tenant
    return out


def ib_tenants_seen(observed: IbFabricState, tenancy: Tenancy, instance: str = DEFAULT_INSTANCE) -> dict[str, frozenset[str]]:
    owners = pkey_owners(tenancy, instance)
    out: dict[str, set[str]] = {}
    shared = shared_hosts(tenancy)
    for node in tenancy.nodes:
        for p in instance_ports(node, instance):
            t = observed.table(p.port_guid)
            if t is None:
                continue
            keys = t.tenant_keys()
            tenants = {owners.get(k, f"pkey:0x{k:04x}") for k in keys} if keys else {QUARANTINE}
            unit = (port_unit(tenancy, p) or node.name) if node.name in shared else node.name  # a shared host's: per slot
            out.setdefault(unit, set()).update(tenants)
    return {k: frozenset(v) for k, v in out.items()}
