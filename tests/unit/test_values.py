"""Every domain value type: accepted forms, canonical output, and one-line errors naming field and range."""

from __future__ import annotations

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import (
    Guid,
    Membership,
    ModuleId,
    NvlinkPartitionId,
    PKey,
    PortNaming,
    VlanId,
    check_id,
    check_mac,
    check_name,
    check_node_description,
    check_port_name,
)


@pytest.mark.parametrize(("raw", "value"), [(1, 1), (4094, 4094), ("100", 100), (" 2000 ", 2000)], ids=str)
def test_vlan_accepts(raw: int | str, value: int) -> None:
    assert VlanId.parse(raw).value == value


@pytest.mark.parametrize("raw", [0, 4095, -1, 5000, "abc", "", True], ids=repr)
def test_vlan_rejects_with_field_and_range(raw: object) -> None:
    with pytest.raises(ValidationError) as ei:
        VlanId.parse(raw)  # type: ignore[arg-type]
    assert ei.value.field == "vlan"
    assert "1-4094" in str(ei.value)
    assert "\n" not in str(ei.value)


@pytest.mark.parametrize(
    ("raw", "value", "membership"),
    [
        ("0x8a01", 0x0A01, Membership.FULL),
        ("8a01", 0x0A01, Membership.FULL),
        (35329, 0x0A01, Membership.FULL),
        ("0x0001", 0x0001, Membership.FULL),
        ("0x7ffe", 0x7FFE, Membership.FULL),
        ("0X0A00", 0x0A00, Membership.FULL),
    ],
    ids=["hex-0x-full-bit", "hex-bare", "int-35329", "lowest", "highest", "upper-case"],
)
def test_pkey_accepts(raw: str | int, value: int, membership: Membership) -> None:
    k = PKey.parse(raw)
    assert (k.value, k.membership) == (value, membership)


@pytest.mark.parametrize(
    "raw",
    ["0x7fff", "0xffff", "0x0000", "0x8000", 0, 0x10000, "zz", "", "0x", -5, 32767],
    ids=[
        "default-7fff",
        "default-ffff",
        "zero",
        "zero-full",
        "int-0",
        "17-bits",
        "not-hex",
        "empty",
        "bare-0x",
        "negative",
        "int-7fff",
    ],
)
def test_pkey_rejects_reserved_and_malformed(raw: str | int) -> None:
    with pytest.raises(ValidationError) as ei:
        PKey.parse(raw)
    assert ei.value.field == "pkey"
    assert "0x0001-0x7ffe" in str(ei.value)


def test_pkey_table_entry_roundtrip() -> None:
    full = PKey.parse("0x0a01")
    assert full.table_entry == 0x8A01
    limited = full.with_membership(Membership.LIMITED)
    assert limited.table_entry == 0x0A01
    assert PKey.from_table_entry(0x8A01) == full
    assert PKey.from_table_entry(0x0A01) == limited
    assert str(full) == "0x0a01"


@pytest.mark.parametrize(
    "raw",
    [
        "0x0002c90300000001",
        "0002c90300000001",
        "00:02:c9:03:00:00:00:01",
        "0002:c903:0000:0001",
        "0x0002C90300000001",
        0x0002C90300000001,
    ],
    ids=["0x", "bare", "colon-bytes", "colon-words", "upper", "int"],
)
def test_guid_forms_print_one_canonical_form(raw: str | int) -> None:
    assert str(Guid.parse(raw)) == "0x0002c90300000001"


@pytest.mark.parametrize(
    "raw",
    ["0x0002c9030000000100", "xyz", "00:02:c9:03:00:00:00", "00:02:c9:03:00:00:00:0g", "", "0002:c903:0000", -1],
    ids=["17-digits", "not-hex", "seven-bytes", "bad-byte", "empty", "three-words", "negative"],
)
def test_guid_rejects_malformed(raw: str | int) -> None:
    with pytest.raises(ValidationError) as ei:
        Guid.parse(raw)
    assert ei.value.field == "guid"
    assert "64-bit hex" in str(ei.value)


@pytest.mark.parametrize(
    ("cls", "good", "bad", "allowed"),
    [
        (NvlinkPartitionId, [0, 7, 65535], [-1, 65536], "0-65535"),
        (ModuleId, [1, 8, 64], [0, 65], "1-64"),
    ],
    ids=["nvlink-partition", "module-id"],
)
def test_small_ids(cls: type, good: list[int], bad: list[int], allowed: str) -> None:
    for g in good:
        assert cls.parse(g).value == g
        assert cls.parse(str(g)).value == g
    for b in bad:
        with pytest.raises(ValidationError, match=allowed):
            cls.parse(b)


@pytest.mark.parametrize(
    ("raw", "ok"),
    [
        ("gpu-a01", True),
        ("tenant.a_1", True),
        ("A", False),
        ("-x", False),
        ("x" * 64, False),
        ("", False),
        ("a b", False),
        ("quarantine\n", False),
        ("alpha\nbeta", False),
        ("[/x]", False),
    ],
    ids=["host", "dots-underscore", "upper", "leading-dash", "too-long", "empty", "space", "trailing-newline", "embedded-newline", "markup"],
)
def test_names(raw: str, ok: bool) -> None:
    if ok:
        assert check_name("tenant.name", raw) == raw
    else:
        with pytest.raises(ValidationError, match="tenant.name"):
            check_name("tenant.name", raw)


def test_mac_normalised_and_checked() -> None:
    assert check_mac("mac", "52-54-00-AB-CD-EF") == "52:54:00:ab:cd:ef"
    with pytest.raises(ValidationError, match="mac"):
        check_mac("mac", "52:54:00:ab:cd")


@pytest.mark.parametrize(
    "raw", ["52:54:00:ab:cd:ef\nx", "52:54:00:ab:cd:ef:00"], ids=["newline-then-text", "seven-octets"]
)
def test_mac_fullmatch(raw: str) -> None:
    with pytest.raises(ValidationError, match="mac"):
        check_mac("mac", raw)


def test_pkey_hex_trailing_newline_is_stripped_not_smuggled() -> None:
    assert PKey.parse("0x8a01\n").value == 0x0A01  # surrounding whitespace is trimmed, never kept
    with pytest.raises(ValidationError):
        PKey.parse("0x8a01\nff")


@pytest.mark.parametrize(
    ("raw", "ok"),
    [("1", True), (42, True), (2**63 - 1, True), ("99999999999999999999", False), (2**63, False), (0, False),
     (-1, False), ("1e3", False), (True, False)],
    ids=["one", "int", "max", "huge-text", "int64-overflow", "zero", "negative", "float-text", "bool"],
)  # fmt: skip
def test_ids_bounded(raw: object, ok: bool) -> None:
    if ok:
        assert check_id("lease_id", raw) == int(str(raw))
    else:
        with pytest.raises(ValidationError, match="lease_id"):
            check_id("lease_id", raw)


@pytest.mark.parametrize(
    ("raw", "dialect", "ok"),
    [("Ethernet40", "sonic", True), ("Ethernet40;reload", None, False), ("$(touch x)", None, False),
     ("E" * 5000, None, False), ("Ethernet40\n", None, False), ("1/1/12", None, True), ("xe-0/0/1", "sonic", False)],
    ids=["sonic", "semicolon", "command-substitution", "5000-chars", "trailing-newline", "generic-slashes", "wrong-dialect"],
)  # fmt: skip
def test_port_names(raw: str, dialect: str | None, ok: bool) -> None:
    if ok:
        assert check_port_name("switch_port", raw, _naming(dialect)) == raw
    else:
        with pytest.raises(ValidationError, match="switch_port"):
            check_port_name("switch_port", raw, _naming(dialect))


def _naming(dialect: str | None) -> PortNaming | None:
    from gpufabric.fabrics.ethernet.drivers.ssh.dialects import load_dialect

    return load_dialect(dialect).port_naming if dialect else None


@pytest.mark.parametrize(
    ("raw", "ok"),
    [("gpu-a01 mlx5_0", True), ("x" * 64, True), ("x" * 65, False), ("gpu-a01\x1b[2J mlx5_0", False), ("", False),
     (" lead", False)],
    ids=["normal", "64-bytes", "65-bytes", "escape-sequence", "empty", "leading-space"],
)  # fmt: skip
def test_node_descriptions(raw: str, ok: bool) -> None:
    if ok:
        assert check_node_description("node_description", raw) == raw
    else:
        with pytest.raises(ValidationError, match="node_description"):
            check_node_description("node_description", raw)
