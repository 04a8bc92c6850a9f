"""Observe an InfiniBand subnet by SMP: every CA port's PKey table and PortInfo, and the SMs.

SMs are found two ways, both from the ports themselves (not from any SM's own view):
ports whose PortInfo.CapabilityMask has IsSM run an SM (``sminfo <lid>`` gives its GUID,
priority and state), and every port's MasterSMLID names the SM that last configured it
(two masters - e.g. a rogue holding another sm_key - show up as two different LIDs).
Queries run concurrently on the :class:`Diag` pool.
"""

from __future__ import annotations

from collections import Counter

from gpufabric.domain.errors import FabricError, GpufabricError
from gpufabric.domain.state import IbFabricState, PkeyTable, SmSeen, SmState
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.diag import CaPort, Diag
from gpufabric.fabrics.infiniband.parsers import PkeyDump, PortInfo


def _read_port(diag: Diag, p: CaPort) -> tuple[PkeyDump, PortInfo]:
    return diag.pkeys(p.lid, p.port_num), diag.portinfo(p.lid, p.port_num)


def observe_fabric(diag: Diag, ports: dict[Guid, CaPort]) -> IbFabricState:
    """Read every port in ``ports`` and every SM seen; raises FabricError when a
    discovered port cannot be read."""
    plist = sorted(ports.values(), key=lambda p: p.guid)
    reads = diag.map(lambda p: _read_port(diag, p), plist)
    tables: list[PkeyTable] = []
    infos: dict[Guid, PortInfo] = {}
    errors: list[str] = []
    for p, r in zip(plist, reads, strict=True):
        if isinstance(r, GpufabricError):
            errors.append(f"{p.guid} ({p.description}): {r.message}")
            continue
        dump, info = r
        tables.append(PkeyTable(p.guid, dump.entries, dump.capacity, p.lid))
        infos[p.guid] = info
    if errors:
        raise FabricError(
            f"{len(errors)} port(s) could not be read: {errors[0]}", fabric="infiniband", errors=errors[:20]
        )
    by_lid = {p.lid: p for p in plist}
    sm_lids = {info.lid for info in infos.values() if info.is_sm}
    master_lids = Counter(info.sm_lid for info in infos.values() if info.sm_lid)
    lids = sorted(sm_lids | set(master_lids))
    sms: list[SmSeen] = []
    for lid, s in zip(lids, diag.map(diag.sminfo, lids), strict=True):
        if isinstance(s, GpufabricError):
            port = by_lid.get(lid)
            # an SM we cannot ask (e.g. its port is being disabled): still report it
            sms.append(SmSeen(port.guid if port else Guid(0), lid, -1, SmState.UNKNOWN, _host(port)))
            continue
        port = by_lid.get(s.lid) or by_lid.get(lid)
        sms.append(SmSeen(s.guid, s.lid, s.priority, s.state, _host(port)))
    masters = [s for s in sms if s.state is SmState.MASTER]
    master = None
    if masters:
        # the master most ports point at
        master = max(masters, key=lambda s: master_lids.get(s.lid, 0)).guid
    uniq = {s.guid: s for s in sms}
    return IbFabricState(tables=tuple(tables), sms=tuple(sorted(uniq.values())), master_guid=master)


def _host(port: CaPort | None) -> str:
    return port.host if port else ""
