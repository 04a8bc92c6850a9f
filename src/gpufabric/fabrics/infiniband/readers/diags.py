"""Pure parsers of infiniband-diags and OpenSM output (no I/O).

Written against infiniband-diags 44.0 and OpenSM 3.3.23; every format is pinned by real
output recorded from ibsim + OpenSM runs in tests/fixtures/infiniband-diags/ and
tests/fixtures/opensm/:

- ``smpquery pkeys LID PORT``   -> :class:`PkeyDump` (non-zero entries, capacity)
- ``smpquery nodeinfo LID``     -> :class:`NodeInfo` (type, GUIDs, PartitionCap)
- ``smpquery portinfo LID PORT``-> :class:`PortInfo` (LID, MasterSMLID, CapabilityMask.IsSM, states)
- ``sminfo [LID]``              -> :class:`SmSeen` (GUID, LID, priority, state)
- the OpenSM log                -> :class:`OpenSMLogScan` (PARSE ERROR / ERR 05xx lines,
  ``SUBNET UP`` count, last MASTER/STANDBY transition)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.state import SmSeen, SmState

IS_SM: Final = 0x2  # PortInfo.CapabilityMask bit 1
_ROW_RE: Final = re.compile(r"^\s*(\d+):((?:\s+0x[0-9a-fA-F]{4})+)\s*$")
_CAP_RE: Final = re.compile(r"^\s*(\d+)\s+pkeys capacity for this port")
_FIELD_RE: Final = re.compile(r"^([A-Za-z0-9_]+):\.*(.*)$")
_SMINFO_RE: Final = re.compile(
    r"sm lid (\d+) sm guid (0x[0-9a-fA-F]+), activity count (\d+) priority (\d+) state (\d+)(?: (\w+))?"
)
_SM_STATES: Final = {0: SmState.NOTACTIVE, 1: SmState.DISCOVERING, 2: SmState.STANDBY, 3: SmState.MASTER}


def _bad(what: str, text: str, why: str) -> ValidationError:
    first = text.strip().splitlines()[0][:80] if text.strip() else "(empty)"
    return ValidationError(what, first, f"{what} output of infiniband-diags 44", why)


@dataclass(frozen=True)
class PkeyDump:
    """A port's PKey table as ``smpquery pkeys`` prints it."""

    entries: tuple[int, ...]  # non-zero 16-bit entries, in table order
    capacity: int  # the table's size ("N pkeys capacity for this port")


def parse_smpquery_pkeys(text: str) -> PkeyDump:
    rows: dict[int, list[int]] = {}
    capacity = 0
    for line in text.splitlines():
        if m := _ROW_RE.match(line):
            rows[int(m.group(1))] = [int(v, 16) for v in m.group(2).split()]
        elif m := _CAP_RE.match(line):
            capacity = int(m.group(1))
    if not rows or not capacity:
        raise _bad("smpquery pkeys", text, "no table rows or no capacity line")
    entries = tuple(v for i in sorted(rows) for v in rows[i] if v & 0x7FFF)
    return PkeyDump(entries, capacity)


def _fields(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        if m := _FIELD_RE.match(line.strip()):
            out.setdefault(m.group(1), m.group(2).strip())
    return out


def _int(fields: dict[str, str], key: str, what: str, text: str) -> int:
    try:
        return int(fields[key], 0)
    except (KeyError, ValueError):
        raise _bad(what, text, f"field {key} missing or not a number") from None


@dataclass(frozen=True)
class NodeInfo:
    node_type: str  # "Channel Adapter" | "Switch" | "Router"
    num_ports: int
    node_guid: Guid
    port_guid: Guid
    system_guid: Guid
    partition_cap: int
    local_port: int

    @property
    def is_ca(self) -> bool:
        return self.node_type == "Channel Adapter"


def parse_smpquery_nodeinfo(text: str) -> NodeInfo:
    f = _fields(text)
    w = "smpquery nodeinfo"
    if "NodeType" not in f:
        raise _bad(w, text, "no NodeType field")
    return NodeInfo(
        node_type=f["NodeType"],
        num_ports=_int(f, "NumPorts", w, text),
        node_guid=Guid(_int(f, "Guid", w, text)),
        port_guid=Guid(_int(f, "PortGuid", w, text)),
        system_guid=Guid(_int(f, "SystemGuid", w, text)),
        partition_cap=_int(f, "PartCap", w, text),
        local_port=_int(f, "LocalPort", w, text),
    )


@dataclass(frozen=True)
class PortInfo:
    lid: int
    sm_lid: int  # MasterSMLID: the LID of the SM that last configured this port
    cap_mask: int
    link_state: str  # Down | Initialize | Armed | Active
    phys_state: str  # LinkUp | Polling | Disabled | ...

    @property
    def is_sm(self) -> bool:
        """An SM runs behind this port (CapabilityMask.IsSM)."""
        return bool(self.cap_mask & IS_SM)


def parse_smpquery_portinfo(text: str) -> PortInfo:
    f = _fields(text)
    w = "smpquery portinfo"
    return PortInfo(
        lid=_int(f, "Lid", w, text),
        sm_lid=_int(f, "SMLid", w, text),
        cap_mask=_int(f, "CapMask", w, text),
        link_state=f.get("LinkState", ""),
        phys_state=f.get("PhysLinkState", ""),
    )


def parse_sminfo(text: str) -> SmSeen:
    """``sminfo: sm lid 1 sm guid 0x100001, activity count 70 priority 14 state 3 SMINFO_MASTER``."""
    m = _SMINFO_RE.search(text)
    if not m:
        raise _bad("sminfo", text, "no 'sm lid ... sm guid ...' line")
    return SmSeen(
        guid=Guid(int(m.group(2), 16)),
        lid=int(m.group(1)),
        priority=int(m.group(4)),
        state=_SM_STATES.get(int(m.group(5)), SmState.UNKNOWN),
    )


# --------------------------------------------------------------------------- OpenSM log
_ERR05_RE: Final = re.compile(r"\bERR 05[0-9A-Fa-f]{2}\b")
_PARSE_RE: Final = re.compile(r"PARSE ERROR|Partition configuration in error")
_STATE_RE: Final = re.compile(r"Entering (MASTER|STANDBY|DISCOVERING|INACTIVE) state")


@dataclass(frozen=True)
class OpenSMLogScan:
    """What a stretch of the OpenSM log says about partitions and sweeps."""

    parse_errors: tuple[str, ...] = ()  # "PARSE ERROR" / "Partition configuration in error" lines
    pkey_errors: tuple[str, ...] = ()  # "ERR 05xx" lines (PKey manager: table full, ...)
    subnet_up: int = 0  # heavy sweeps completed
    last_state: str = ""  # last "Entering X state" (MASTER, STANDBY, ...)

    @property
    def ok(self) -> bool:
        return not self.parse_errors and not self.pkey_errors

    def problems(self) -> tuple[str, ...]:
        return self.parse_errors + self.pkey_errors


def _msg(line: str) -> str:
    """Drop the timestamp/thread prefix: ``Nov 29 15:29:56 575496 [AAD46C0] 0x01 -> msg``."""
    return line.split(" -> ", 1)[1].strip() if " -> " in line else line.strip()


def parse_opensm_log(text: str) -> OpenSMLogScan:
    parse_errors: list[str] = []
    pkey_errors: list[str] = []
    up = 0
    state = ""
    for line in text.splitlines():
        if "SUBNET UP" in line:
            up += 1
        if _PARSE_RE.search(line):
            parse_errors.append(_msg(line))
        elif _ERR05_RE.search(line):
            pkey_errors.append(_msg(line))
        if m := _STATE_RE.search(line):
            state = m.group(1)
    return OpenSMLogScan(tuple(parse_errors), tuple(pkey_errors), up, state)
