"""Pure decoding of raw SMP buffers (batch reader) against smpquery text of the same attributes.

tests/fixtures/infiniband-diags/smpbatch.json holds, per query, the raw response of the
smpbatch process and the smpquery/sminfo output recorded back to back on ibsim + OpenSM
(record_smpbatch.py). The offsets are also cross-checked against libibmad's own
``mad_get_field`` (libibmad.so.5 ships with infiniband-diags).
"""

from __future__ import annotations

import ctypes
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.fabrics.infiniband.drivers.opensm.smpread import SmpQuery, decode
from gpufabric.fabrics.infiniband.readers import smp as d
from gpufabric.fabrics.infiniband.readers.diags import (
    PkeyDump,
    parse_sminfo,
    parse_smpquery_nodeinfo,
    parse_smpquery_pkeys,
    parse_smpquery_portinfo,
)
from gpufabric.fabrics.infiniband.state import SmState

FIXTURE = Path(__file__).parents[3] / "fixtures" / "infiniband-diags" / "smpbatch.json"
ROWS: list[dict[str, Any]] = json.loads(FIXTURE.read_text())["rows"]
PARSERS: dict[str, Callable[[str], object]] = {
    "pkeys": parse_smpquery_pkeys,
    "portinfo": parse_smpquery_portinfo,
    "nodeinfo": parse_smpquery_nodeinfo,
    "sminfo": parse_sminfo,
}
OK = [r for r in ROWS if r["response"]["ok"]]


def rid(r: dict[str, Any]) -> str:
    return f"{r['op']}-lid{r['lid']}-port{r['port']}"


@pytest.mark.parametrize("row", OK, ids=[rid(r) for r in OK])
def test_decoded_raw_equals_parsed_smpquery(row: dict[str, Any]) -> None:
    q = SmpQuery(row["op"], row["lid"], row["port"])
    assert row["tool_rc"] == 0
    assert decode(q, row["response"]["raw"]) == PARSERS[row["op"]](row["tool_stdout"])


def test_fixture_covers_two_blocks_switch_ports_and_a_failure() -> None:
    two_blocks = [r for r in OK if r["op"] == "pkeys" and len(r["response"]["raw"]["pkeys"]) == 2]
    tables = [decode(SmpQuery("pkeys", r["lid"], 1), r["response"]["raw"]) for r in two_blocks]
    assert any(isinstance(t, PkeyDump) and len(t.entries) > 32 for t in tables)
    assert any("switchinfo" in r["response"]["raw"] for r in OK)  # switch port > 0
    failed = [r for r in ROWS if not r["response"]["ok"]]
    assert [(r["response"]["error"], r["tool_rc"] != 0) for r in failed] == [("node info query failed", True)]


def _raw(op: str, key: str) -> bytes:
    row = next(r for r in OK if r["op"] == op)
    return bytes.fromhex(row["response"]["raw"][key])


def test_known_values() -> None:
    pi = d.decode_portinfo(_raw("portinfo", "portinfo"))
    assert (pi.lid, pi.sm_lid, pi.is_sm, pi.link_state, pi.phys_state) == (1, 1, True, "Active", "LinkUp")
    sm = d.decode_sminfo(_raw("sminfo", "sminfo"), 1)
    assert (str(sm.guid), sm.lid, sm.state) == ("0x0002c90310000001", 1, SmState.MASTER)


# -- synthetic buffers: what the recorded fabric does not show -----------------------------
def block(values: dict[int, int]) -> bytes:
    b = bytearray(64)
    for i, v in values.items():
        b[2 * i : 2 * i + 2] = v.to_bytes(2, "big")
    return bytes(b)


@pytest.mark.parametrize(
    ("capacity", "blocks", "entries"),
    [
        (8, [block({0: 0x7FFF, 7: 0x8001, 8: 0x8002})], (0x7FFF, 0x8001)),  # smpquery prints 8
        (12, [block({0: 0xFFFF, 11: 0x8003, 15: 0x8004, 16: 0x8005})], (0xFFFF, 0x8003, 0x8004)),  # rounds to 16
        (40, [block({31: 0x8001}), block({0: 0x8002, 7: 0x8003, 8: 0x8004})], (0x8001, 0x8002, 0x8003)),
        (32, [block({0: 0x8000, 1: 0x0000, 2: 0x0A01})], (0x0A01,)),  # key 0 (full or not) is empty
    ],
    ids=["cap8", "cap12-rounds-up", "cap40-second-block-cut", "invalid-key-skipped"],
)
def test_pkey_table_cut_like_smpquery(capacity: int, blocks: list[bytes], entries: tuple[int, ...]) -> None:
    got = d.decode_pkey_table(capacity, blocks)
    assert (got.entries, got.capacity) == (entries, capacity)


@pytest.mark.parametrize(
    ("capacity", "blocks"),
    [(0, []), (64, [block({})]), (32, [b"\x00" * 10])],
    ids=["no-table", "missing-block", "short-buffer"],
)
def test_pkey_table_rejects(capacity: int, blocks: list[bytes]) -> None:
    with pytest.raises(ValidationError):
        d.decode_pkey_table(capacity, blocks)


@pytest.mark.parametrize(
    ("byte32", "byte33", "state", "phys"),
    [(0x74, 0x52, "Active", "LinkUp"), (0x71, 0x32, "Down", "Disabled"), (0x75, 0x82, "?(5)", "?(8)")],
    ids=["active", "disabled", "unknown"],
)
def test_port_states_named_like_libibmad(byte32: int, byte33: int, state: str, phys: str) -> None:
    raw = bytearray(64)
    raw[32], raw[33] = byte32, byte33
    pi = d.decode_portinfo(bytes(raw))
    assert (pi.link_state, pi.phys_state) == (state, phys)


# -- offsets cross-checked with libibmad ----------------------------------------------------
# MAD_FIELDS ids of libibmad.so.5 (ABI), each checked by its name first.
FIELDS = {
    "Lid": 29,
    "SMLid": 30,
    "CapMask": 31,
    "LinkState": 39,
    "PhysLinkState": 40,
    "NodeType": 77,
    "NumPorts": 78,
    "SystemGuid": 79,
    "Guid": 80,
    "PortGuid": 81,
    "PartCap": 82,
    "LocalPort": 85,
    "PartEnforceCap": 99,
    "SmInfoGuid": 142,
    "SmPriority": 145,
    "SmState": 146,
}


@pytest.fixture(scope="module")
def mad() -> Callable[[bytes, str], int]:
    lib = ctypes.CDLL("libibmad.so.5")
    lib.mad_field_name.restype = ctypes.c_char_p
    lib.mad_field_name.argtypes = [ctypes.c_int]
    lib.mad_get_field.restype = ctypes.c_uint32
    lib.mad_get_field.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.mad_get_field64.restype = ctypes.c_uint64
    lib.mad_get_field64.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    for name, fid in FIELDS.items():
        assert lib.mad_field_name(fid) == name.encode()

    def get(raw: bytes, name: str) -> int:
        fn = lib.mad_get_field64 if "Guid" in name else lib.mad_get_field
        return int(fn(raw, 0, FIELDS[name]))

    return get


@pytest.mark.parametrize("row", OK, ids=[rid(r) for r in OK])
def test_offsets_agree_with_libibmad(row: dict[str, Any], mad: Callable[[bytes, str], int]) -> None:
    raw = {k: bytes.fromhex(v) for k, v in row["response"]["raw"].items() if isinstance(v, str)}
    if "nodeinfo" in raw:
        ni, b = d.decode_nodeinfo(raw["nodeinfo"]), raw["nodeinfo"]
        assert (d.node_type(b), ni.num_ports, ni.partition_cap, ni.local_port) == (
            mad(b, "NodeType"),
            mad(b, "NumPorts"),
            mad(b, "PartCap"),
            mad(b, "LocalPort"),
        )
        assert (ni.system_guid.value, ni.node_guid.value, ni.port_guid.value) == (
            mad(b, "SystemGuid"),
            mad(b, "Guid"),
            mad(b, "PortGuid"),
        )
    if "switchinfo" in raw:
        assert d.switch_partition_cap(raw["switchinfo"]) == mad(raw["switchinfo"], "PartEnforceCap")
    if "portinfo" in raw:
        b = raw["portinfo"]
        pi = d.decode_portinfo(b)
        assert (pi.lid, pi.sm_lid, pi.cap_mask) == (mad(b, "Lid"), mad(b, "SMLid"), mad(b, "CapMask"))
        assert (b[32] & 0xF, b[33] >> 4) == (mad(b, "LinkState"), mad(b, "PhysLinkState"))
    if "sminfo" in raw:
        b = raw["sminfo"]
        sm = d.decode_sminfo(b, row["lid"])
        assert (sm.guid.value, sm.priority, b[20] & 0xF) == (
            mad(b, "SmInfoGuid"),
            mad(b, "SmPriority"),
            mad(b, "SmState"),
        )
    assert raw  # every row carries at least one buffer
