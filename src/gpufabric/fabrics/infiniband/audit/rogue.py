"""Rogue subnet managers: detect (pure); the OpenSM driver contains them (:mod:`~gpufabric.fabrics.infiniband.drivers.opensm.contain`).

Detection (:func:`find_rogue_sms`) is a pure function over an observed
:class:`IbFabricState`. An SM is identified by WHERE it answers (the LID, and the port
discovery found at that LID: ``SmSeen.port_guid``), not by the GUID its SMInfo claims:
it is trusted only when both its location and its claimed GUID are trusted SM ports. An
SM claiming the trusted SM's GUID from another LID, or a victim's GUID, is a finding at
its own LID. Measured on ibsim + OpenSM 3.3.23: a
rogue opensm of higher priority (or equal priority and lower GUID) becomes MASTER and
rewrites every PKey table in ~0.5 s; with a different sm_key both stay MASTER and the
trusted one does not repair anything until it is restarted; ibsim has no M_Key, so
nothing stops the rewrite itself.

Containment (:func:`contain_rogue_sms`, policy ``contain``): rediscover the topology (the
LIDs being cut must be placed on today's map, not a cached one), then, per finding, disable
the switch port the answering LID is cabled to (``ibportstate [-y M_KEY] <switch lid> <port>
disable``, run as the trusted SM node) - never a port looked up by the claimed GUID, and
never a trusted SM's own port. A finding that cannot be placed (no discovered CA port at its
LID, e.g. a decoy MasterSMLID) or that sits on a trusted SM port is an *alert*
(``RogueReport.alerts``) and does not stop the others from being cut. Then write the intended
layout, restart the trusted OpenSM, and verify by SMP reads that every remaining port holds
exactly the PKeys of the intended layout.
Policy ``alert`` only reports. Times to detect and to restore are measured.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.audit.places import Places
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import CaPort
from gpufabric.fabrics.infiniband.state import IbFabricState, SmState


class RoguePolicy(enum.StrEnum):
    ALERT = "alert"
    CONTAIN = "contain"


@dataclass(frozen=True, order=True)
class RogueFinding:
    guid: Guid  # the GUID the SM claims in SMInfo (not trusted for anything)
    lid: int  # where it answered
    node: str  # the stored node of the port at ``lid`` (by GUID, else cabling: :mod:`.places`), never its description
    state: SmState
    priority: int
    reason: str
    port_guid: Guid | None = None  # the port discovery found at ``lid``: what containment cuts off
    where: str = ""  # how :meth:`Places.where` puts it (" on node N ...", the description quoted as a claim)

    def __str__(self) -> str:
        where = self.where or (f" on {self.node}" if self.node else "")
        at = f", port {self.port_guid}" if self.port_guid is not None and self.port_guid != self.guid else ""
        return (
            f"{self.reason}: SM {self.guid} (lid {self.lid}{at}{where}, {self.state.value}, priority {self.priority})"
        )


def find_rogue_sms(
    state: IbFabricState, trusted: Iterable[Guid], nodes: Places | Mapping[Guid, str] | None = None
) -> tuple[RogueFinding, ...]:
    """Every SM seen that is not a trusted SM where it answers: its location (the port at
    its LID) or its claimed GUID is untrusted, or the two differ. ``nodes``: where the
    inventory puts a port (:class:`Places`, or port GUID -> node): the node of a finding is
    the stored node of the port at its LID (by GUID, else by cabling), never its node
    description (set by the host); with no port placed at the LID, the stored node of the
    GUID the SM claims."""
    ok = frozenset(trusted)
    places = nodes if isinstance(nodes, Places) else Places(dict(nodes or {}))
    out: dict[int, RogueFinding] = {}
    for s in state.sms:
        where = s.port_guid  # None: discovery did not place the LID (then only the claim is known)
        if s.guid in ok and where in (None, s.guid):
            continue
        if where is not None and s.guid != where:
            reason = f"SM claiming GUID {s.guid} answers from port {where}"
        elif s.state is SmState.MASTER or s.guid == state.master_guid:
            reason = "untrusted master SM"
        else:
            reason = "untrusted SM"
        if where is None:
            node, at = places.node(s.guid), ""
        else:
            node = places.node(where, s.switch_guid, s.switch_port)
            at = places.where(where, s.switch_guid, s.switch_port, s.description)
        out[s.lid] = RogueFinding(s.guid, s.lid, node, s.state, s.priority, reason, where, at)
    m = state.master_guid
    if m is not None and m not in ok and all(f.guid != m for f in out.values()):
        out[0] = RogueFinding(m, 0, places.node(m), SmState.MASTER, -1, "untrusted master SM")
    return tuple(sorted(out.values()))


@dataclass(frozen=True)
class RogueReport:
    findings: tuple[RogueFinding, ...]
    policy: RoguePolicy
    contained: tuple[Guid, ...] = ()  # HCAs whose switch port was disabled
    detect_seconds: float = 0.0
    restore_seconds: float = 0.0  # containment start -> every table verified
    verified_ports: int = 0
    alerts: tuple[tuple[RogueFinding, str], ...] = ()  # findings not cut off, with why


def containment_targets(
    findings: Iterable[RogueFinding], ports: Mapping[Guid, CaPort], trusted: Iterable[Guid]
) -> tuple[list[CaPort], list[tuple[RogueFinding, str]]]:
    """(the CA port behind each finding's answering LID, from the discovered topology;
    the findings that cannot be cut, with why) - pure, per finding: a LID discovery cannot
    place, or a location that is a trusted SM port (cutting it off would hand over the
    subnet), is an alert and leaves the other findings' targets in place."""
    by_lid = {p.lid: p for p in ports.values()}
    ok = frozenset(trusted)
    out: dict[Guid, CaPort] = {}
    alerts: list[tuple[RogueFinding, str]] = []
    for f in findings:
        p = by_lid.get(f.lid)
        if p is None or p.switch_lid is None or p.switch_port is None:
            alerts.append((f, f"no discovered CA port and switch port at lid {f.lid}"))
        elif p.guid in ok:
            alerts.append((f, f"lid {f.lid} is the trusted SM port {p.guid}; not disabling it"))
        else:
            out[p.guid] = p
    return list(out.values()), alerts
