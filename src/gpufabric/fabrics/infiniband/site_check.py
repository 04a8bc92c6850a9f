"""``gpufabric site check`` for the InfiniBand fabric: the subnet read by SMP with the
configured driver, the SMs that answer (SMInfo) against ``trusted_sm_guids``, the SM's
hardening (M_Key, sm_key...: the hardening audit's own reading, :mod:`~gpufabric.fabrics.infiniband.audit.hardening`), whether a move can read back the IPoIB
broadcast groups (an ``sa_dump`` per SM host, or for the co-located SM), the PKey
pool disjoint from partitions already on the subnet that gpufabric did not write (PKey
tables read by SMP, and a partitions.conf that gpufabric did not render), every inventory
port GUID on the subnet, every CA port whose host the inventory knows but not the port, and
(with ``sm_hosts``) every standby SM's partitions file against what gpufabric wrote
(``IB-SM-CONFIG-DIVERGED``, the audit's own reading, :mod:`~gpufabric.fabrics.infiniband.audit.sm_files`).

Levels: an answering SM that is not trusted is critical (repair would contain the wrong
port, or the rogue runs the subnet); everything else that breaks a move is an error; weak
settings are what the hardening audit says (critical/high -> error, else warning)."""

from __future__ import annotations

from typing import Any

from gpufabric.domain.severity import Severity
from gpufabric.domain.site_check import CheckLevel, SiteCheck, SiteContext
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.audit.hardening import OPENSM_DEFAULTS, check_hardening, check_keys
from gpufabric.fabrics.infiniband.audit.keys import SM_NAME, key_states
from gpufabric.fabrics.infiniband.audit.sm_files import INVARIANT as SM_FILES
from gpufabric.fabrics.infiniband.audit.sm_files import sm_file_violations
from gpufabric.fabrics.infiniband.drivers.base import DISCOVERY, OPENSM_CONFIG, SMINFO, capabilities_of
from gpufabric.fabrics.infiniband.entries import KIND, ib_ports
from gpufabric.fabrics.infiniband.segments import PKeyMapping, global_section, segment_pkey
from gpufabric.fabrics.infiniband.state import IbFabricState
from gpufabric.fabrics.infiniband.state.partitions import HEADER, parse_partitions_conf

OK, WARN, ERR, CRIT = CheckLevel.OK, CheckLevel.WARNING, CheckLevel.ERROR, CheckLevel.CRITICAL
SUBJECT = "infiniband"
GLOBAL_POOL = "config.yaml segments.infiniband"  # where a subnet without a pool of its own takes its PKeys

def _msg(e: BaseException) -> str:
    return str(getattr(e, "message", None) or e or type(e).__name__)


def trusted_sms(state: IbFabricState, trusted: tuple[Guid, ...]) -> list[SiteCheck]:
    out: list[SiteCheck] = []
    answering = {s.guid for s in state.sms}
    for s in sorted(state.sms):
        where = f"LID {s.lid}" + (f" (node description {s.description[:64]!r}, set by its host)" if s.description else "")
        if s.guid in trusted:
            out.append(SiteCheck("IB-TRUSTED-SM", OK, f"trusted SM {s.guid} answers at {where}: {s.state.value}, "
                                 f"priority {s.priority}", str(s.guid)))  # fmt: skip
        else:
            out.append(SiteCheck("IB-TRUSTED-SM", CRIT, f"SM {s.guid} answers at {where} ({s.state.value}, priority "
                                 f"{s.priority}) but is not in fabrics.yaml trusted_sm_guids "
                                 f"({', '.join(map(str, trusted))})", str(s.guid)))  # fmt: skip
    for g in trusted:
        if g not in answering:
            seen = ", ".join(str(s.guid) for s in state.sms) or "none"
            out.append(SiteCheck("IB-TRUSTED-SM", ERR, f"fabrics.yaml trusted_sm_guids {g}: no SM answers with this "
                                 f"GUID (SMs answering: {seen})", str(g)))  # fmt: skip
    if not state.sms:
        out.append(SiteCheck("IB-TRUSTED-SM", ERR, "no SM answers on the subnet (SMInfo)", SUBJECT))
    return out


def standby_files(state: IbFabricState, device: str) -> list[SiteCheck]:
    """Each standby SM host's partitions file (``sm_files`` of observe): one that differs from
    what gpufabric wrote is critical (a takeover would revert isolation), one that cannot be
    vouched for an error; nothing without standbys."""
    standbys = [f.host for f in state.sm_files if f.role == "standby"]
    if not standbys:
        return []
    found = sm_file_violations(state)
    out = [SiteCheck(SM_FILES, CRIT if v.severity is Severity.CRITICAL else ERR, v.message, v.device or device)
           for v in found]  # fmt: skip
    return out or [SiteCheck(SM_FILES, OK, f"{device}: the partitions file of standby SM host(s) "
                             f"{', '.join(standbys)} is what gpufabric wrote", device)]  # fmt: skip


def hardening(state: IbFabricState, device: str) -> list[SiteCheck]:
    settings = dict(state.settings)
    if not settings:
        return [SiteCheck("IB-HARDENING", WARN, f"{device}: SM settings (sm_key, M_Key) not checked: the driver "
                          "reads none (UFM keeps them)", device)]  # fmt: skip
    found = [*check_hardening(settings), *check_keys(settings)]
    out = [
        SiteCheck("IB-HARDENING", ERR if f.severity.rank >= Severity.HIGH.rank else WARN,
                  f"{device} {f.setting} = {f.observed}: {f.description} (expected {f.expected})", f"{device}:{f.setting}")
        for f in found
    ]  # fmt: skip
    unsupported = ", ".join(k.name for k in key_states(settings, OPENSM_DEFAULTS) if k.status == "not supported")
    return out or [SiteCheck("IB-HARDENING", OK, f"{device}: sm_key, sa_key, M_Key, CC_Key and partition enforcement set"
                             + (f" ({unsupported}: not supported by {SM_NAME})" if unsupported else ""), device)]  # fmt: skip


def foreign_partitions(sm: Any) -> dict[int, str]:
    """PKey number -> where: partitions of a partitions.conf that gpufabric did not render."""
    conf = getattr(getattr(sm, "config", None), "partitions_conf", None)
    if OPENSM_CONFIG not in capabilities_of(sm) or conf is None or not conf.exists():
        return {}
    text = conf.read_text()
    if text.startswith(HEADER):
        return {}
    return {p.pkey.value & 0x7FFF: f"partition {p.name} of {conf}" for p in parse_partitions_conf(text).partitions}


def pkey_pool(
    state: IbFabricState, ctx: SiteContext, foreign: dict[int, str], where: str = GLOBAL_POOL, own: PKeyMapping | None = None
) -> list[SiteCheck]:
    """The subnet's pool (``own``, else config.yaml's in ``ctx.segments``) against the PKeys on the subnet."""
    ib = own or global_section(ctx.segments).pool
    pool = {ib.pkey_for(s).value & 0x7FFF: s for s in ib.seg_ids()}
    owned = {pk.value & 0x7FFF for n in ctx.networks for seg in n.segments if (pk := segment_pkey(seg)) is not None}
    used: dict[int, str] = dict(foreign)
    for t in state.tables:
        for k in sorted(t.tenant_keys()):
            used.setdefault(k, f"PKey table of port {t.port_guid}")
    clash = sorted(k for k in used if k in pool and k not in owned)
    rng = ib.pkey_range()
    out = [
        SiteCheck("IB-PKEY-POOL", ERR, f"{where} (PKeys 0x{rng.start:04x}-0x{rng.end:04x}): PKey "
                  f"0x{k:04x} (seg_id {pool[k]}) is already used on the subnet by {used[k]}, not by a gpufabric network",
                  f"pkey:0x{k:04x}")
        for k in clash
    ]  # fmt: skip
    return out or [SiteCheck("IB-PKEY-POOL", OK, f"PKey pool 0x{rng.start:04x}-0x{rng.end:04x} disjoint from the "
                             f"{len(set(used) - owned)} partition(s) gpufabric did not write", SUBJECT)]  # fmt: skip


def inventory_ports(sm: Any, state: IbFabricState, ctx: SiteContext, skip: frozenset[Guid], instance: str = KIND) -> list[SiteCheck]:
    want = {str(p.port_guid): p for n in ctx.nodes for p in ib_ports(n, instance)}
    ports: dict[Guid, str] = {t.port_guid: "" for t in state.tables}
    if DISCOVERY in capabilities_of(sm):
        ports.update({g: p.description for g, p in sm.ports().items()})
    seen = {str(g) for g in ports}
    out = [
        SiteCheck("IB-INVENTORY-PORT", ERR, f"inventory port {p.node} {p.device}/{p.port_num} (GUID {a}) is not on "
                  "the subnet", a)
        for a, p in sorted(want.items()) if a not in seen
    ]  # fmt: skip
    if want and not out:
        out.append(SiteCheck("IB-INVENTORY-PORT", OK, f"all {len(want)} inventory port(s) seen on the subnet", SUBJECT))
    for g, desc in sorted(ports.items()):
        host = desc.split(" ", 1)[0]
        if str(g) not in want and g not in skip and host in ctx.node_names:
            out.append(SiteCheck("IB-UNKNOWN-PORT", WARN, f"port {g} ({desc}) belongs to inventory node {host} but is "
                                 "not in the inventory", str(g)))  # fmt: skip
    return out


def ipoib_readback(config: Any, device: str) -> list[SiteCheck]:
    """With IPoIB on, a move verifies each IPoIB partition's broadcast group in the master SM's
    SA dump; an SM host (or a co-located SM) without ``sa_dump`` is a move whose groups are never
    checked: a warning naming the key."""
    if not config.ipoib.enabled:
        return []
    if not config.sm_hosts:
        if config.sa_dump is not None:
            return [SiteCheck("IB-IPOIB-READBACK", OK, f"{device}: IPoIB groups read back from {config.sa_dump}", device)]
        return [SiteCheck("IB-IPOIB-READBACK", WARN, "fabrics.yaml infiniband options.sa_dump: unset, so a move "
                          "never verifies its IPoIB broadcast groups (set it to the SM's opensm-sa.dump)", device)]  # fmt: skip
    out = []
    for i, h in enumerate(config.sm_hosts):
        if h.sa_dump is None and config.sa_dump is None:
            out.append(SiteCheck("IB-IPOIB-READBACK", WARN, f"fabrics.yaml infiniband options.sm_hosts[{i}].sa_dump: "
                                 f"unset, so a move while {h.name} is master never verifies its IPoIB broadcast groups "
                                 "(set it to that host's opensm-sa.dump)", h.name))  # fmt: skip
    return out or [SiteCheck("IB-IPOIB-READBACK", OK, f"{device}: every SM host's SA dump is configured", device)]


def infiniband_site_checks(
    sm: Any, trusted: tuple[Guid, ...], ctx: SiteContext, pool: str = GLOBAL_POOL, own: PKeyMapping | None = None,
    instance: str = KIND,
) -> list[SiteCheck]:
    """Every check of one subnet (``instance``: whose inventory ports it looks for); ``pool``: where
    its segment pool is configured, ``own`` that pool when the subnet has one of its own (else
    config.yaml's, ``ctx.segments``; with neither known the pool is not checked)."""
    device = type(sm).__name__.removesuffix("Driver").lower() or SUBJECT
    try:
        state: IbFabricState = sm.observe()
    except Exception as e:
        return [SiteCheck("IB-REACH", ERR, f"fabrics.yaml infiniband ({device}): subnet not readable: {_msg(e)}", device)]
    out = [SiteCheck("IB-REACH", OK, f"{device}: {len(state.tables)} port(s) read by SMP", device)]
    notes: Any = getattr(sm, "transport_notes", None)
    for n in notes() if callable(notes) else ():
        out.append(SiteCheck("IB-TRANSPORT", WARN, f"fabrics.yaml infiniband options.{n.setting}: {n.message}", device))
    if SMINFO in capabilities_of(sm) or state.sms:
        out += trusted_sms(state, trusted)
    else:  # UFM runs the subnet's SM itself; its REST API gives no SMInfo of the subnet
        out.append(SiteCheck("IB-TRUSTED-SM", WARN, f"{device}: the SMs that answer are not checked against "
                             "trusted_sm_guids (this driver reads no SMInfo)", device))  # fmt: skip
    out += hardening(state, device)
    out += standby_files(state, device)
    if OPENSM_CONFIG in capabilities_of(sm):
        out += ipoib_readback(sm.config, device)
    try:
        foreign = foreign_partitions(sm)
    except Exception as e:
        out.append(SiteCheck("IB-PKEY-POOL", WARN, f"{device}: partitions.conf not readable: {_msg(e)}", device))
        foreign = {}
    if own is not None or ctx.segments is not None:
        out += pkey_pool(state, ctx, foreign, pool, own)
    skip = frozenset(trusted) | frozenset(Guid.parse(str(g)) for g in ctx.settings.get("sm_port_guids", ()))
    try:
        out += inventory_ports(sm, state, ctx, skip, instance)
    except Exception as e:
        out.append(SiteCheck("IB-INVENTORY-PORT", ERR, f"{device}: discovery failed: {_msg(e)}", device))
    return out
