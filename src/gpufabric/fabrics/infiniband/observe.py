"""Observe an InfiniBand subnet by SMP: every CA port's PKey table and PortInfo, and the SMs.

SMs are found two ways, both from the ports themselves (not from any SM's own view):
ports whose PortInfo.CapabilityMask has IsSM run an SM (``sminfo <lid>`` gives its GUID,
priority and state), and every port's MasterSMLID names the SM that last configured it
(two masters - e.g. a rogue holding another sm_key - show up as two different LIDs).
All port queries go to the :class:`SmpReader` as ONE read (the batch reader sends them
through one libibmad port; the smpquery fallback runs them on the Diag pool), then one
more read for the SMs' SMInfo.
"""

from __future__ import annotations

from collections import Counter

from gpufabric.domain.errors import FabricError, GpufabricError
from gpufabric.domain.state import IbFabricState, PkeyTable, SmSeen, SmState
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.diag import CaPort
from gpufabric.fabrics.infiniband.parsers import PkeyDump, PortInfo
from gpufabric.fabrics.infiniband.smpread import SmpQuery, SmpReader


def observe_fabric(reader: SmpReader, ports: dict[Guid, CaPort]) -> IbFabricState:
    """Read every port in ``ports`` and every SM seen; raises FabricError when a
    discovered port cannot be read."""
    plist = sorted(ports.values(), key=lambda p: p.guid)
    queries = [SmpQuery(op, p.lid, p.port_num) for p in plist for op in ("pkeys", "portinfo")]
    reads = reader.read(queries)
    tables: list[PkeyTable] = []
    infos: dict[Guid, PortInfo] = {}
    errors: list[str] = []
    for i, p in enumerate(plist):
        dump, info = reads[2 * i], reads[2 * i + 1]
        bad = next((r for r in (dump, info) if isinstance(r, GpufabricError)), None)
        if bad is not None:
            errors.append(f"{p.guid} ({p.description}): {bad.message}")
            continue
        if not isinstance(dump, PkeyDump) or not isinstance(info, PortInfo):
            raise FabricError(
                f"{p.guid}: reader answered {type(dump).__name__}/{type(info).__name__}", fabric="infiniband"
            )
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
    for lid, s in zip(lids, reader.read([SmpQuery("sminfo", lid) for lid in lids]), strict=True):
        if not isinstance(s, SmSeen):
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
