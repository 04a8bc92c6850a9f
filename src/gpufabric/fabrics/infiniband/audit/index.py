"""Lookups for the InfiniBand audit (pure), built once per audit so that every check is linear
in the input: port GUID -> inventory port, node -> tenant, PKey -> owning tenants, and the
observed/desired PKey table of each port.

A port's tenant is its node's owner in the ``Tenancy`` (lease, else quarantine) or, on a shared
host (issue 33), the owner of the slot holding the port's GPU (:func:`~gpufabric.fabrics.infiniband.plan.port_unit`:
quarantine without affinity or slot); a port GUID
that is not in the inventory counts as the pseudo-tenant ``(not in inventory)``. A PKey's
owners are the tenants whose networks use it; quarantine owns no PKey. The SM node's ports
(``settings["sm_port_guids"]``) are infrastructure: they are left out of the tenant rows.
Everything is per fabric instance (one subnet): the inventory ports cabled to it and the
PKeys of the networks' segments on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import QUARANTINE
from gpufabric.domain.values import DEFAULT_PKEY, Guid, Membership
from gpufabric.fabrics.infiniband.audit.places import Places
from gpufabric.fabrics.infiniband.entries import IbPort
from gpufabric.fabrics.infiniband.plan import DEFAULT_INSTANCE, instance_ports, port_unit, shared_hosts
from gpufabric.fabrics.infiniband.segments import segment_pkey
from gpufabric.fabrics.infiniband.state import IbFabricState, PartitionLayout, PkeyTable

UNOWNED: Final = "(unowned)"
"""Owner label of a PKey that no network claims."""

NOT_IN_INVENTORY: Final = "(not in inventory)"
"""Tenant label of a port GUID that is not in the inventory."""

IbRow = tuple[Guid, str, str, str, tuple[int, ...], frozenset[int], frozenset[int]]
"""(GUID, device, node, tenant, entries, tenant PKeys held, PKeys held as full member)
of one observed PKey table that is not the SM node's; device and node are "" and the
tenant NOT_IN_INVENTORY when the GUID is not in the inventory. PKeys are 15-bit, the
default partition and 0 left out."""

_UNOWNED_SET: Final = frozenset({UNOWNED})
_EMPTY: Final[frozenset[int]] = frozenset()


def guids(settings: Mapping[str, Any], key: str) -> frozenset[Guid]:
    """A setting's GUIDs (``Guid`` values or their text)."""
    return frozenset(g if isinstance(g, Guid) else Guid.parse(g, field=key) for g in settings.get(key, ()) or ())


@dataclass(frozen=True)
class IbAudit:
    """GUID-keyed maps use ``Guid.value`` (a plain int) as the key."""

    tenancy: Tenancy
    observed: IbFabricState
    trusted: frozenset[Guid]
    ib_ports: Mapping[int, IbPort]
    pkey_owners: Mapping[int, frozenset[str]]
    tables: Mapping[int, PkeyTable]
    columns: tuple[tuple[Any, ...], ...]  # IbRow fields, one tuple per field (see rows)
    desired_tables: Mapping[int, frozenset[int]] | None  # every inventory/observed/desired GUID
    shared: frozenset[str] = frozenset()  # the shared hosts (issue 33, :func:`~gpufabric.fabrics.infiniband.plan.shared_hosts`)

    @classmethod
    def build(
        cls, tenancy: Tenancy, layout: PartitionLayout | None, observed: IbFabricState, instance: str = DEFAULT_INSTANCE
    ) -> IbAudit:
        ib = {q.port_guid.value: q for n in tenancy.nodes for q in instance_ports(n, instance)}
        tenant = {n.name: tenancy.owner(n.name) for n in tenancy.nodes}
        shared = shared_hosts(tenancy)
        by_slot = {k: _slot_tenant(tenancy, q) for k, q in ib.items() if q.node in shared} if shared else {}
        tables = {t.port_guid.value: t for t in observed.tables}
        entry_keys = {e: split_entries(e) for e in {t.entries for t in tables.values()}}
        sm = {g.value for g in guids(tenancy.settings, "sm_port_guids")}
        return cls(
            tenancy=tenancy,
            observed=observed,
            trusted=guids(tenancy.settings, "trusted_sm_guids"),
            ib_ports=ib,
            pkey_owners=pkey_owner_sets(tenancy, instance),
            tables=tables,
            columns=_columns(tables, ib, tenant, sm, entry_keys, by_slot),
            desired_tables=None if layout is None else _desired_tables(layout, ib, tables),
            shared=shared,
        )

    def owner_set(self, pkey: int) -> frozenset[str]:
        return self.pkey_owners.get(pkey, _UNOWNED_SET)

    def rows(self) -> Iterator[IbRow]:
        """Every observed PKey table but the SM node's, as an ``IbRow``.

        Rows are kept as columns of existing objects and zipped on the fly, so that an
        audit keeps almost no per-port objects alive (less work for the garbage collector).
        """
        return zip(*self.columns, strict=True)

    def places(self) -> Places:
        """Where the inventory puts a port: by its GUID, else by its cabling (never its description)."""
        return Places.of(self.ib_ports.values())

    def place(self, guid: Guid) -> tuple[str, str]:
        """(device, node) of a port GUID, empty strings when not in the inventory."""
        p = self.ib_ports.get(guid.value)
        return (p.device, p.node) if p else ("", "")


def _slot_tenant(tenancy: Tenancy, port: IbPort) -> str:
    """The tenant of a shared host's HCA port: its GPU's slot's owner (quarantine: none)."""
    unit = port_unit(tenancy, port)
    return tenancy.owner(unit) if unit is not None else QUARANTINE


def pkey_owner_sets(tenancy: Tenancy, instance: str = DEFAULT_INSTANCE) -> dict[int, frozenset[str]]:
    """PKey -> the tenants whose networks use it on ``instance`` (quarantine owns none)."""
    pkeys: dict[int, set[str]] = {}
    for net in tenancy.networks.values():
        for seg in net.segments:
            if seg.fabric == instance and (pk := segment_pkey(seg)) is not None:
                pkeys.setdefault(pk.value, set()).add(net.tenant)
    return {k: frozenset(v) for k, v in pkeys.items()}


def split_entries(entries: tuple[int, ...]) -> tuple[frozenset[int], frozenset[int]]:
    """(tenant PKeys, PKeys held as full member) of raw table entries: 15-bit, 0 and the
    default partition left out."""
    keys = frozenset(e & 0x7FFF for e in entries) - {0, DEFAULT_PKEY}
    full = frozenset(e & 0x7FFF for e in entries if e & 0x8000) - {0, DEFAULT_PKEY}
    return keys, full


def _columns(
    tables: Mapping[int, PkeyTable],
    ib: Mapping[int, IbPort],
    tenant: Mapping[str, str],
    sm: set[int],
    entry_keys: Mapping[tuple[int, ...], tuple[frozenset[int], frozenset[int]]],
    by_slot: Mapping[int, str],
) -> tuple[tuple[Any, ...], ...]:
    cols: tuple[list[Any], ...] = ([], [], [], [], [], [], [])
    guid_col, devices, nodes, tenants, entries, keys, full = cols
    for key, t in tables.items():
        if key in sm:
            continue
        p = ib.get(key)
        k, f = entry_keys[t.entries]
        guid_col.append(t.port_guid)
        devices.append(p.device if p else "")
        nodes.append(p.node if p else "")
        tenants.append((by_slot.get(key) or tenant[p.node]) if p else NOT_IN_INVENTORY)
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


def fmt_pkeys(pkeys: Iterable[int]) -> str:
    return ",".join(f"0x{p:04x}" for p in sorted(pkeys))
