"""InfiniBand isolation invariants (pure), checked on the *observed* PKey tables and SMs:
``IB-PKEY-SHARED``, ``IB-GUID-FOREIGN-PKEY``, ``IB-DEFAULT-FULL-HOST``, ``IB-ROGUE-SM``,
``IB-PKEY-CAPACITY``, ``IB-HARDENING``, ``IB-SM-GUID-MISMATCH``, ``IB-CABLING``, the shared hosts'
``IB-SLOT-FOREIGN-PKEY`` and ``IB-SLOT-SHARED-HCA`` (:mod:`.slots`), the InfiniBand part of
``X-DRIFT`` and the ports the audit's ``X-NODE-SPLIT`` compares.

PKey tables are what the ports really hold (read by SMP), not the SM's configuration.
Ownership rules: :mod:`~gpufabric.fabrics.infiniband.audit.index`. The SM node's ports are exempt from the tenant checks
and are the only ports allowed full membership of the default partition. ``IB-HARDENING``
(the trusted SM's settings as its driver read them) also takes findings the caller hands in.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

from gpufabric.domain.fabric import InvariantSpec, PortSeen, Tenancy
from gpufabric.domain.findings import DRIFT, Violation
from gpufabric.domain.severity import Severity
from gpufabric.domain.values import DEFAULT_PKEY, Guid
from gpufabric.fabrics.infiniband.audit.hardening import check_hardening, check_keys
from gpufabric.fabrics.infiniband.audit.index import IbAudit, fmt_pkeys, guids, pkey_owner_sets, split_entries
from gpufabric.fabrics.infiniband.audit.places import Places
from gpufabric.fabrics.infiniband.audit.slots import SPECS as SLOT_SPECS
from gpufabric.fabrics.infiniband.audit.slots import slot_violations
from gpufabric.fabrics.infiniband.entries import KIND
from gpufabric.fabrics.infiniband.plan import DEFAULT_INSTANCE, instance_ports, port_unit, shared_hosts
from gpufabric.fabrics.infiniband.state import IbFabricState, SmState

IB: Final = KIND
HARDENING: Final = "IB-HARDENING"
CABLING: Final = "IB-CABLING"

INVARIANTS: Final = (
    InvariantSpec("IB-PKEY-SHARED", Severity.CRITICAL.value,
                  "A PKey is held by ports of two or more tenants with at least one full member, so they can talk."),
    InvariantSpec("IB-GUID-FOREIGN-PKEY", Severity.CRITICAL.value,
                  "A port GUID holds (full or limited) a PKey that its node's tenant does not own."),
    InvariantSpec("IB-DEFAULT-FULL-HOST", Severity.HIGH.value,
                  "A port other than the SM node's is a full member (0xffff) of the default partition."),
    InvariantSpec("IB-ROGUE-SM", Severity.CRITICAL.value,
                  "A subnet manager seen on the fabric (the master or any other) is not a trusted SM GUID."),
    InvariantSpec("IB-PKEY-CAPACITY", Severity.MEDIUM.value,
                  "A port needs more PKeys (observed or desired) than its PKey table capacity (PartitionCap)."),
    InvariantSpec(HARDENING, Severity.HIGH.value,
                  "SM/fabric hardening findings computed by the InfiniBand driver (M_Key, SM_Key, ...), passed through.",
                  external=True),
    InvariantSpec("IB-SM-GUID-MISMATCH", Severity.CRITICAL.value,
                  "An SM's SMInfo claims a GUID other than the port discovered at the LID it answers from."),
    InvariantSpec(CABLING, Severity.HIGH.value,
                  "A port GUID is seen on another switch GUID/port than the one stored for it (recabled, or a spoofed GUID)."),
    *SLOT_SPECS,
)  # fmt: skip

_SEVERITY: Final = {**{s.id: Severity(s.severity) for s in INVARIANTS}, DRIFT: Severity.MEDIUM}


def _v(inv: str, message: str, device: str, port: str, node: str = "", tenants: tuple[str, ...] = (),
       resource: str = "") -> Violation:  # fmt: skip
    return Violation(inv, _SEVERITY[inv], message, IB, device, port, node, tenants, resource)


def _who(node: str, tenant: str) -> str:
    return f"node {node}, tenant {tenant}" if node else tenant


def violations(a: IbAudit) -> Iterator[Violation]:
    for check in (pkey_shared, guid_foreign_pkey, default_full_host, rogue_sm, pkey_capacity, hardening,
                  sm_guid_mismatch, cabling, slot_violations, drift):  # fmt: skip
        yield from check(a)


def pkey_shared(a: IbAudit) -> Iterator[Violation]:
    """IB-PKEY-SHARED: a PKey whose members can talk across tenants, i.e. it is held by
    ports of two or more tenants and at least one of them is a full member.

    Flags every member port whose tenant does not own the PKey (all members when none of
    the tenants present owns it).
    """
    tenants_of: dict[int, set[str]] = {}
    has_full: set[int] = set()
    for _, _, _, tenant, _, keys, full in a.rows():
        for pk in keys:
            tenants_of.setdefault(pk, set()).add(tenant)
        has_full.update(full)
    shared = {pk: ts for pk, ts in tenants_of.items() if len(ts) > 1 and pk in has_full}
    if not shared:
        return
    for guid, device, node, tenant, _, keys, _ in a.rows():
        if keys.isdisjoint(shared):
            continue
        for pk in sorted(keys & shared.keys()):
            tenants = shared[pk]
            if tenant in a.pkey_owners.get(pk, frozenset()):
                continue
            others = ", ".join(sorted(tenants - {tenant}))
            yield _v("IB-PKEY-SHARED",
                     f"pkey 0x{pk:04x} on port {guid} ({_who(node, tenant)}) is shared with tenant(s) {others}",
                     device, str(guid), node, tuple(sorted(tenants)), f"pkey:0x{pk:04x}")  # fmt: skip


def guid_foreign_pkey(a: IbAudit) -> Iterator[Violation]:
    """IB-GUID-FOREIGN-PKEY: a port holds (full or limited) a PKey its tenant does not own (a
    shared host's ports: ``IB-SLOT-FOREIGN-PKEY``, :mod:`.slots`)."""
    memo: dict[tuple[str, frozenset[int]], frozenset[int]] = {}
    for guid, device, node, tenant, _, keys, _ in a.rows():
        if not keys or node in a.shared:
            continue
        k = (tenant, keys)
        foreign = memo.get(k)
        if foreign is None:
            foreign = memo[k] = frozenset(pk for pk in keys if tenant not in a.owner_set(pk))
        if not foreign:
            continue
        owners = sorted({o for pk in foreign for o in a.owner_set(pk)})
        yield _v("IB-GUID-FOREIGN-PKEY",
                 f"port {guid} ({_who(node, tenant)}) holds pkey(s) {fmt_pkeys(foreign)} owned by {', '.join(owners)}",
                 device, str(guid), node, tuple(sorted({tenant, *owners})), f"pkey:{fmt_pkeys(foreign)}")  # fmt: skip


def default_full_host(a: IbAudit) -> Iterator[Violation]:
    """IB-DEFAULT-FULL-HOST: a port other than the SM node's is a full member (0xffff)
    of the default partition, so it can reach every host of the subnet."""
    full_default = DEFAULT_PKEY | 0x8000
    for guid, device, node, tenant, entries, _, _ in a.rows():
        if full_default in entries:
            yield _v("IB-DEFAULT-FULL-HOST",
                     f"port {guid} ({_who(node, tenant)}) is a full member of the default partition 0xffff",
                     device, str(guid), node, resource=f"pkey:0x{DEFAULT_PKEY:04x}")  # fmt: skip


def rogue_sm(a: IbAudit) -> Iterator[Violation]:
    """IB-ROGUE-SM: a subnet manager (the master or any other seen) is not a trusted one."""
    master = a.observed.master_guid
    reported: set[Guid] = set()
    places = a.places() if a.observed.sms else Places()
    for sm in a.observed.sms:
        if sm.guid in a.trusted or sm.guid in reported:
            continue
        reported.add(sm.guid)
        is_master = sm.state is SmState.MASTER or sm.guid == master
        node = places.node(sm.port_guid, sm.switch_guid, sm.switch_port)
        where = places.where(sm.port_guid, sm.switch_guid, sm.switch_port, sm.description)
        yield _v("IB-ROGUE-SM",
                 f"{'master' if is_master else sm.state.value} SM {sm.guid}{where} (lid {sm.lid}, "
                 f"priority {sm.priority}) is not trusted", node, str(sm.guid), node)  # fmt: skip
    if master is not None and master not in a.trusted and master not in reported:
        yield _v("IB-ROGUE-SM", f"master SM {master} is not trusted", "", str(master))


def pkey_capacity(a: IbAudit) -> Iterator[Violation]:
    """IB-PKEY-CAPACITY: a port's PKey table (observed, or as the desired layout would fill
    it) holds more keys than the port's PartitionCap; the SM silently drops the excess."""
    desired_tables = a.desired_tables or {}
    for key, table in a.tables.items():
        cap = table.capacity
        if cap <= 0:
            continue
        observed = len(table.entries) - table.entries.count(0)
        desired = len(desired_tables.get(key, ()))
        if observed <= cap and desired <= cap:
            continue
        device, node = a.place(table.port_guid)
        what = "the desired layout gives it" if desired >= observed else "it holds"
        on = f" (node {node})" if node else ""
        yield _v("IB-PKEY-CAPACITY", f"port {table.port_guid}{on}: {what} {max(observed, desired)} pkeys, capacity {cap}",
                 device, str(table.port_guid), node)  # fmt: skip


def hardening(a: IbAudit) -> Iterator[Violation]:
    """IB-HARDENING: the trusted SM's settings (M_Key, SM_Key, ...) and every key NCP SDN04-05
    names (CC_Key, the keys OpenSM does not take, a key other than fabrics.yaml's), as its
    driver read them."""
    settings = dict(a.observed.settings)
    for f in [*check_hardening(settings), *check_keys(settings)] if settings else ():
        yield Violation(HARDENING, f.severity, f"{f.setting} = {f.observed!r}: {f.description} (expected {f.expected})",
                        fabric=IB, device="opensm", resource=f"setting:{f.setting}")  # fmt: skip


def sm_guid_mismatch(a: IbAudit) -> Iterator[Violation]:
    """IB-SM-GUID-MISMATCH: an SM answers from one port (``SmSeen.port_guid``, from discovery)
    while claiming another port's GUID in SMInfo. An SM borrowing the trusted SM's GUID, or
    a victim's, is caught here even when its claim is "trusted"."""
    places = a.places() if a.observed.sms else Places()
    for sm in a.observed.sms:
        if sm.port_guid is None or sm.port_guid == sm.guid:
            continue
        trusted = " (a trusted SM's GUID)" if sm.guid in a.trusted else ""
        node = places.node(sm.port_guid, sm.switch_guid, sm.switch_port)
        where = places.where(sm.port_guid, sm.switch_guid, sm.switch_port, sm.description)
        yield _v("IB-SM-GUID-MISMATCH",
                 f"SM at lid {sm.lid} (port {sm.port_guid}{where}) claims GUID {sm.guid}{trusted} in SMInfo",
                 node, str(sm.port_guid), node, resource=f"lid:{sm.lid}")  # fmt: skip


def cabling(a: IbAudit) -> Iterator[Violation]:
    """IB-CABLING: a stored port seen by discovery on another switch GUID/port than its stored
    cabling. High, not critical: a recabled HCA keeps its PKeys (they follow the GUID), but the
    inventory then puts switch-port actions (a rogue SM's containment) on the wrong cable, and
    a GUID seen where another port is cabled may be a host spoofing it, holding the PKeys of the
    GUID's tenant, which no PKey check can tell. Fix: re-import (the change is held for
    ``--confirm``), or find the host."""
    if not a.observed.cabling:
        return
    places = a.places()
    for seen in a.observed.cabling:
        p = a.ib_ports.get(seen.port_guid.value)
        if p is None or p.switch_guid is None or p.switch_port is None:
            continue
        if (p.switch_guid, p.switch_port) == (seen.switch_guid, seen.switch_port):
            continue
        other = places.by_cable.get((seen.switch_guid, seen.switch_port), "")
        there = f", where node {other}'s port is stored" if other and other != p.node else ""
        yield _v(CABLING,
                 f"port {seen.port_guid} (node {p.node}, {p.device}) is seen on switch {seen.switch_guid} port "
                 f"{seen.switch_port}{there}; stored on switch {p.switch_guid} port {p.switch_port}",
                 p.device, str(seen.port_guid), p.node, resource=f"cable:{seen.switch_guid}/{seen.switch_port}")  # fmt: skip


def _fmt_entries(entries: Iterable[int]) -> str:
    return ",".join(f"0x{e:04x}" for e in sorted(entries)) or "none"


def drift(a: IbAudit) -> Iterator[Violation]:
    """X-DRIFT (InfiniBand part): desired vs observed PKey tables. A port the fabric does not
    show is drift only when it is owed a tenant PKey (a quarantined port cut off the fabric
    is as isolated as can be)."""
    keys: set[int] = set(a.ib_ports)
    if a.desired_tables is not None:
        keys.update(a.desired_tables)  # covers the observed and the desired GUIDs too
    have_memo: dict[tuple[int, ...], frozenset[int]] = {}
    for key in keys:
        table = a.tables.get(key)
        if table is not None and a.desired_tables is None:
            continue
        msg = ""
        if table is None:
            want_keys = a.desired_tables.get(key) if a.desired_tables is not None else None
            if want_keys is not None and all(e & 0x7FFF == DEFAULT_PKEY for e in want_keys):
                continue  # unreachable (e.g. cut off after a rogue SM) and owed no tenant key: isolated
            msg = "pkey table not in the observed state"
        elif a.desired_tables is not None:
            want = a.desired_tables[key]
            have = have_memo.get(table.entries)
            if have is None:
                have = have_memo[table.entries] = frozenset(e for e in table.entries if e)
            if want == have:
                continue
            msg = (
                f"desired pkeys {_fmt_entries(want)}, observed {_fmt_entries(have)} "
                f"(missing {_fmt_entries(want - have)}, extra {_fmt_entries(have - want)})"
            )
        port = a.ib_ports.get(key)
        guid = port.port_guid if port else Guid(key)
        device, node = (port.device, port.node) if port else ("", "")
        on = f" (node {node})" if node else ""
        yield _v(DRIFT, f"port {guid}{on}: {msg}", device, str(guid), node)


def ports_seen(tenancy: Tenancy, observed: IbFabricState, instance: str = DEFAULT_INSTANCE) -> Iterator[PortSeen]:
    """Every observed PKey table of an inventory port on ``instance`` (the SM node's left out)
    holding a PKey some tenant owns there, with those owners."""
    owners = pkey_owner_sets(tenancy, instance)
    sm = {g.value for g in guids(tenancy.settings, "sm_port_guids")}
    where = {q.port_guid.value: q for n in tenancy.nodes for q in instance_ports(n, instance)}
    shared = shared_hosts(tenancy)
    memo: dict[tuple[int, ...], frozenset[str]] = {}
    for t in observed.tables:
        key = t.port_guid.value
        p = where.get(key)
        if p is None or key in sm:
            continue
        eff = memo.get(t.entries)
        if eff is None:
            eff = memo[t.entries] = frozenset(o for k in split_entries(t.entries)[0] for o in owners.get(k, ()))
        if eff:  # a shared host's HCA: its GPU's slot's (the host's own without one)
            node = (port_unit(tenancy, p) or p.node) if p.node in shared else p.node
            yield PortSeen(node, IB, p.device, t.port_guid, eff)
