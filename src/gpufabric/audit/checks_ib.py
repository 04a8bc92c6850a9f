"""InfiniBand isolation invariants, checked on the *observed* PKey tables and SMs.

PKey tables are what the ports really hold (read by SMP), not the SM's configuration.
A port's tenant is its node's tenant (lease, else quarantine); a port GUID that is not
in the inventory counts as the pseudo-tenant ``(not in inventory)``. The SM node's ports
(``sm_port_guids``) are infrastructure: they are exempt from the tenant checks and are
the only ports allowed full membership of the default partition. A PKey's owners are
the tenants whose networks use it; quarantine owns no PKey.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpufabric.audit.index import DEFAULT_PKEY, AuditIndex, fmt_pkeys
from gpufabric.audit.model import AuditInput, Finding
from gpufabric.domain.models import Fabric
from gpufabric.domain.state import SmState
from gpufabric.domain.values import Guid

IB = Fabric.INFINIBAND


def _who(node: str, tenant: str) -> str:
    return f"node {node}, tenant {tenant}" if node else tenant


def pkey_shared(inp: AuditInput, idx: AuditIndex) -> Iterator[Finding]:
    """IB-PKEY-SHARED: a PKey whose members can talk across tenants, i.e. it is held by
    ports of two or more tenants and at least one of them is a full member.

    Flags every member port whose tenant does not own the PKey (all members when none of
    the tenants present owns it).
    """
    tenants_of: dict[int, set[str]] = {}
    has_full: set[int] = set()
    for _, _, _, tenant, _, keys, full in idx.ib_rows():
        for pk in keys:
            tenants_of.setdefault(pk, set()).add(tenant)
        has_full.update(full)
    shared = {pk: ts for pk, ts in tenants_of.items() if len(ts) > 1 and pk in has_full}
    if not shared:
        return
    for guid, device, node, tenant, _, keys, _ in idx.ib_rows():
        if keys.isdisjoint(shared):
            continue
        for pk in sorted(keys & shared.keys()):
            tenants = shared[pk]
            if tenant in idx.pkey_owners.get(pk, frozenset()):
                continue
            others = ", ".join(sorted(tenants - {tenant}))
            yield Finding(
                f"pkey 0x{pk:04x} on port {guid} ({_who(node, tenant)}) is shared with tenant(s) {others}",
                fabric=IB,
                device=device,
                port=str(guid),
                node=node,
                tenants=tuple(sorted(tenants)),
                resource=f"pkey:0x{pk:04x}",
            )


def guid_foreign_pkey(inp: AuditInput, idx: AuditIndex) -> Iterator[Finding]:
    """IB-GUID-FOREIGN-PKEY: a port holds (full or limited) a PKey its tenant does not own."""
    memo: dict[tuple[str, frozenset[int]], frozenset[int]] = {}
    for guid, device, node, tenant, _, keys, _ in idx.ib_rows():
        if not keys:
            continue
        k = (tenant, keys)
        foreign = memo.get(k)
        if foreign is None:
            foreign = memo[k] = frozenset(pk for pk in keys if tenant not in idx.pkey_owner_set(pk))
        if not foreign:
            continue
        owners = sorted({o for pk in foreign for o in idx.pkey_owner_set(pk)})
        yield Finding(
            f"port {guid} ({_who(node, tenant)}) holds pkey(s) {fmt_pkeys(foreign)} owned by {', '.join(owners)}",
            fabric=IB,
            device=device,
            port=str(guid),
            node=node,
            tenants=tuple(sorted({tenant, *owners})),
            resource=f"pkey:{fmt_pkeys(foreign)}",
        )


def default_full_host(inp: AuditInput, idx: AuditIndex) -> Iterator[Finding]:
    """IB-DEFAULT-FULL-HOST: a port other than the SM node's is a full member (0xffff)
    of the default partition, so it can reach every host of the subnet."""
    full_default = DEFAULT_PKEY | 0x8000
    for guid, device, node, tenant, entries, _, _ in idx.ib_rows():
        if full_default in entries:
            yield Finding(
                f"port {guid} ({_who(node, tenant)}) is a full member of the default partition 0xffff",
                fabric=IB,
                device=device,
                port=str(guid),
                node=node,
                resource="pkey:0x7fff",
            )


def rogue_sm(inp: AuditInput, idx: AuditIndex) -> Iterator[Finding]:
    """IB-ROGUE-SM: a subnet manager (the master or any other seen) is not a trusted one."""
    trusted = inp.trusted_sm_guids
    master = inp.observed.ib.master_guid
    reported: set[Guid] = set()
    for sm in inp.observed.ib.sms:
        if sm.guid in trusted or sm.guid in reported:
            continue
        reported.add(sm.guid)
        is_master = sm.state is SmState.MASTER or sm.guid == master
        where = f" on node {sm.node}" if sm.node else ""
        yield Finding(
            f"{'master' if is_master else sm.state.value} SM {sm.guid}{where} (lid {sm.lid}, "
            f"priority {sm.priority}) is not trusted",
            fabric=IB,
            device=sm.node,
            port=str(sm.guid),
            node=sm.node,
        )
    if master is not None and master not in trusted and master not in reported:
        yield Finding(f"master SM {master} is not trusted", fabric=IB, port=str(master))


def pkey_capacity(inp: AuditInput, idx: AuditIndex) -> Iterator[Finding]:
    """IB-PKEY-CAPACITY: a port's PKey table (observed, or as the desired layout would fill
    it) holds more keys than the port's PartitionCap; the SM silently drops the excess."""
    desired_tables = idx.desired_tables or {}
    for key, table in idx.observed_tables.items():
        cap = table.capacity
        if cap <= 0:
            continue
        observed = len(table.entries) - table.entries.count(0)
        desired = len(desired_tables.get(key, ()))
        if observed <= cap and desired <= cap:
            continue
        device, node = idx.ib_place(table.port_guid)
        what = "the desired layout gives it" if desired >= observed else "it holds"
        on = f" (node {node})" if node else ""
        yield Finding(
            f"port {table.port_guid}{on}: {what} {max(observed, desired)} pkeys, capacity {cap}",
            fabric=IB,
            device=device,
            port=str(table.port_guid),
            node=node,
        )
