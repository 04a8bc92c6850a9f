"""Observe an InfiniBand subnet by SMP: every CA port's PKey table and PortInfo, and the SMs.

SMs are found two ways, both from the ports themselves (not from any SM's own view):
ports whose PortInfo.CapabilityMask has IsSM run an SM (``sminfo <lid>`` gives its GUID,
priority and state), and every port's MasterSMLID names the SM that last configured it
(two masters - e.g. a rogue holding another sm_key - show up as two different LIDs).

Each SM is identified by WHERE it answers, not by what it says: ``SmSeen.port_guid`` is the
port discovery found at the answering LID (ibnetdiscover: LID -> CA port -> switch port),
next to the GUID the SMInfo reply claims. An SM reporting another port's GUID (the
trusted SM's, or a victim's) is listed under its own LID, never merged with the SM whose
GUID it borrowed; the audit flags the mismatch (``IB-SM-GUID-MISMATCH``) and containment
disables the switch port of the answering LID.
All port queries go to the :class:`SmpReader` as ONE read (the batch reader sends them
through one libibmad port; the smpquery fallback runs them on the Diag pool), then one
more read for the SMs' SMInfo. Each port's cabling (``IbFabricState.cabling``, what the audit's
``IB-CABLING`` compares with the stored) is the topology's, so it costs no SMP of its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from gpufabric.domain.errors import FabricError, GpufabricError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.drivers.opensm.smpread import SmpQuery, SmpReader
from gpufabric.fabrics.infiniband.readers.diags import PkeyDump, PortInfo
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import CaPort
from gpufabric.fabrics.infiniband.state import IbFabricState, PkeyTable, PortCable, SmSeen, SmState


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
    replies = reader.read([SmpQuery("sminfo", lid) for lid in lids])
    sms = locate_sms(lids, replies, by_lid)
    masters = [s for s in sms if s.state is SmState.MASTER]
    master = None
    if masters:
        # the master most ports point at
        master = max(masters, key=lambda s: master_lids.get(s.lid, 0)).guid
    return IbFabricState(tables=tuple(tables), sms=tuple(sorted(sms)), master_guid=master, cabling=cabling(plist))


def cabling(ports: Sequence[CaPort]) -> tuple[PortCable, ...]:
    """Each port's switch GUID/port as the topology the ports were read by found it (pure: no
    SMP of its own), for the audit's ``IB-CABLING``; a port discovery placed on no switch
    (back-to-back, or a switch without a GUID) is left out."""
    return tuple(sorted(PortCable(p.guid, p.switch_guid, p.switch_port) for p in ports
                        if p.switch_guid is not None and p.switch_port is not None))  # fmt: skip


def locate_sms(lids: Sequence[int], replies: Sequence[object], by_lid: Mapping[int, CaPort]) -> list[SmSeen]:
    """One :class:`SmSeen` per answering LID (pure): the GUID the SMInfo reply claims, and the
    port discovery found at that LID (``port_guid``; None when the LID is not a known CA port)
    with its cabling and its node description (a claim: the node is named from the store)."""
    sms: dict[int, SmSeen] = {}
    for lid, s in zip(lids, replies, strict=True):
        port = by_lid.get(lid)
        where = port.guid if port else None
        if not isinstance(s, SmSeen):
            # an SM we cannot ask (e.g. its port is being disabled): still report it, by location
            sms[lid] = SmSeen(where or Guid(0), lid, -1, SmState.UNKNOWN, *_at(port))
            continue
        # the LID we asked is where it is; a reply naming another LID is not believed either
        sms[lid] = SmSeen(s.guid, lid, s.priority, s.state, *_at(port))
    return list(sms.values())


def _at(port: CaPort | None) -> tuple[str, Guid | None, Guid | None, int | None]:
    if port is None:
        return "", None, None, None
    return port.description, port.guid, port.switch_guid, port.switch_port
