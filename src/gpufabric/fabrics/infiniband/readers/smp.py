"""Pure decoding of raw SMP attribute data (the 64-byte SMP data field), no I/O.

Used by the batch SMP reader (:mod:`~gpufabric.fabrics.infiniband.drivers.opensm.smpbatch` returns raw attribute buffers as hex): it
yields exactly the models :mod:`~gpufabric.fabrics.infiniband.readers.diags` builds from ``smpquery``/``sminfo`` text, so
both reader paths give identical results (tests/fabrics/infiniband/functional/test_ib_smpbatch.py runs both
on the same ibsim fabric). Offsets are the InfiniBand Architecture Specification's
(vol. 1, ch. 14.2.5: NodeInfo, SwitchInfo, PortInfo, P_KeyTable, SMInfo); big-endian; they
are cross-checked against libibmad's own ``mad_get_field`` in tests/fabrics/infiniband/unit/test_ib_smpdecode.py.

- NodeInfo: NodeType byte 2, NumPorts 3, SystemImageGUID 4-11, NodeGUID 12-19, PortGUID
  20-27, PartitionCap 28-29, LocalPortNum 36.
- SwitchInfo: PartitionEnforcementCap 14-15 (the PKey table size of switch ports > 0).
- PortInfo: LID 16-17, MasterSMLID 18-19, CapabilityMask 20-23, PortState = low nibble of
  byte 32, PortPhysicalState = high nibble of byte 33.
- P_KeyTable: 32 big-endian 16-bit entries per block (attribute modifier = block | port << 16).
- SMInfo: GUID 0-7, SM_Key 8-15, ActCount 16-19, Priority = high nibble of byte 20,
  SMState = low nibble.
"""

from __future__ import annotations

from typing import Final

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.readers.diags import NodeInfo, PkeyDump, PortInfo
from gpufabric.fabrics.infiniband.state import SmSeen, SmState

SMP_DATA_SIZE: Final = 64
PKEYS_PER_BLOCK: Final = 32
NODE_SWITCH: Final = 2

# as libibmad's mad_dump_val prints them (what smpquery shows)
_NODE_TYPES: Final = {1: "Channel Adapter", 2: "Switch", 3: "Router"}
_PORT_STATES: Final = {0: "NoChange", 1: "Down", 2: "Initialize", 3: "Armed", 4: "Active"}
_PHYS_STATES: Final = {
    0: "NoChange",
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "PhyTest",
}
_SM_STATES: Final = {0: SmState.NOTACTIVE, 1: SmState.DISCOVERING, 2: SmState.STANDBY, 3: SmState.MASTER}


def _check(what: str, raw: bytes) -> bytes:
    if len(raw) < SMP_DATA_SIZE:
        raise ValidationError(what, raw.hex()[:32], f"{SMP_DATA_SIZE} bytes of SMP data", f"got {len(raw)} bytes")
    return raw


def _u(raw: bytes, start: int, size: int) -> int:
    return int.from_bytes(raw[start : start + size], "big")


# -- what the reader needs before it can ask for a PKey table ---------------------------
def node_type(nodeinfo: bytes) -> int:
    return _check("NodeInfo", nodeinfo)[2]


def num_ports(nodeinfo: bytes) -> int:
    return _check("NodeInfo", nodeinfo)[3]


def partition_cap(nodeinfo: bytes) -> int:
    return _u(_check("NodeInfo", nodeinfo), 28, 2)


def switch_partition_cap(switchinfo: bytes) -> int:
    return _u(_check("SwitchInfo", switchinfo), 14, 2)


def pkey_blocks(capacity: int) -> int:
    """How many P_KeyTable blocks hold ``capacity`` entries (smpquery reads as many)."""
    return (capacity + PKEYS_PER_BLOCK - 1) // PKEYS_PER_BLOCK


def pkey_modifier(block: int, port: int) -> int:
    return block | port << 16


# -- attribute -> model -------------------------------------------------------------------
def decode_nodeinfo(raw: bytes) -> NodeInfo:
    r = _check("NodeInfo", raw)
    t = r[2]
    return NodeInfo(
        node_type=_NODE_TYPES.get(t, f"?({t})?"),
        num_ports=r[3],
        node_guid=Guid(_u(r, 12, 8)),
        port_guid=Guid(_u(r, 20, 8)),
        system_guid=Guid(_u(r, 4, 8)),
        partition_cap=_u(r, 28, 2),
        local_port=r[36],
    )


def decode_portinfo(raw: bytes) -> PortInfo:
    r = _check("PortInfo", raw)
    state, phys = r[32] & 0xF, r[33] >> 4
    return PortInfo(
        lid=_u(r, 16, 2),
        sm_lid=_u(r, 18, 2),
        cap_mask=_u(r, 20, 4),
        link_state=_PORT_STATES.get(state, f"?({state})"),
        phys_state=_PHYS_STATES.get(phys, f"?({phys})"),
    )


def decode_pkey_table(capacity: int, blocks: list[bytes]) -> PkeyDump:
    """The table as ``smpquery pkeys`` shows it: ``capacity`` entries (the last block cut
    to a multiple of 8, as smpquery prints it), keeping entries whose key bits are non-zero."""
    if capacity <= 0:
        raise ValidationError("PKeyTable", capacity, "a PartitionCap > 0", "port reports no PKey table")
    n = pkey_blocks(capacity)
    if len(blocks) != n:
        raise ValidationError("PKeyTable", len(blocks), f"{n} block(s) for {capacity} entries", "wrong block count")
    entries: list[int] = []
    for i, block in enumerate(blocks):
        b = _check("PKeyTable", block)
        k = ((capacity + 7 - i * PKEYS_PER_BLOCK) // 8) * 8 if i + 1 == n else PKEYS_PER_BLOCK
        entries.extend(v for v in (_u(b, 2 * j, 2) for j in range(k)) if v & 0x7FFF)
    return PkeyDump(tuple(entries), capacity)


def decode_sminfo(raw: bytes, lid: int) -> SmSeen:
    """SMInfo read from ``lid`` (``sminfo LID`` prints that LID as the SM's)."""
    r = _check("SMInfo", raw)
    return SmSeen(
        guid=Guid(_u(r, 0, 8)),
        lid=lid,
        priority=r[20] >> 4,
        state=_SM_STATES.get(r[20] & 0xF, SmState.UNKNOWN),
    )


def sminfo_request() -> bytes:
    """The SMInfo payload ``sminfo`` sends with its Get (state STANDBY, all else zero)."""
    b = bytearray(SMP_DATA_SIZE)
    b[20] = 2
    return bytes(b)
