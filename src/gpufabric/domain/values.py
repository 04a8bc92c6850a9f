"""Typed, immutable identifiers of the fabrics: VLAN ids, PKeys, GUIDs, NVLink ids.

Each value validates on construction and raises :class:`ValidationError` naming the
field and the allowed range. ``parse`` accepts the textual forms operators type.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Final

from gpufabric.domain.errors import ValidationError

_HEX_RE: Final = re.compile(r"(0x)?[0-9a-f]+")


def _to_int(field: str, raw: str | int, allowed: str, *, base: int = 10) -> int:
    if isinstance(raw, bool):
        raise ValidationError(field, raw, allowed, "not a number")
    if isinstance(raw, int):
        return raw
    text = str(raw).strip().lower()
    try:
        if text.startswith("0x"):
            return int(text, 16)
        return int(text, base)
    except ValueError:
        raise ValidationError(field, raw, allowed, "not a number") from None


@dataclass(frozen=True, order=True)
class VlanId:
    """An 802.1Q VLAN id, 1–4094."""

    value: int

    MIN: Final = 1
    MAX: Final = 4094
    ALLOWED: Final = "1-4094"

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise ValidationError("vlan", self.value, self.ALLOWED, "not an integer")
        if not self.MIN <= self.value <= self.MAX:
            raise ValidationError("vlan", self.value, self.ALLOWED)

    @classmethod
    def parse(cls, raw: str | int, field: str = "vlan") -> VlanId:
        v = _to_int(field, raw, cls.ALLOWED)
        if not cls.MIN <= v <= cls.MAX:
            raise ValidationError(field, raw, cls.ALLOWED)
        return cls(v)

    def __str__(self) -> str:
        return str(self.value)


DEFAULT_PKEY = 0x7FFF
"""The default partition's 15-bit number (table entries 0x7fff limited, 0xffff full): one source."""


class Membership(enum.StrEnum):
    FULL = "full"
    LIMITED = "limited"


@dataclass(frozen=True, order=True)
class PKey:
    """An InfiniBand partition key usable by a tenant: 15-bit base 0x0001–0x7ffe.

    ``value`` is the 15-bit partition number; ``membership`` is the top bit of the
    16-bit table entry (full = 1). 0x0000/0x8000 (invalid) and 0x7fff/0xffff (the
    default partition) are rejected as tenant keys. ``parse`` accepts "0x8a01",
    "8a01" (hex) and 35329 (int) and names the partition 0x0a01; membership is full
    unless given (use :meth:`from_table_entry` to read the top bit of a table entry).
    """

    value: int
    membership: Membership = Membership.FULL

    MIN: Final = 0x0001
    MAX: Final = 0x7FFE
    ALLOWED: Final = "0x0001-0x7ffe (0x0000, 0x7fff, 0x8000, 0xffff are reserved)"

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise ValidationError("pkey", self.value, self.ALLOWED, "not an integer")
        if not self.MIN <= self.value <= self.MAX:
            raise ValidationError("pkey", _hex16(self.value), self.ALLOWED)

    @classmethod
    def parse(cls, raw: str | int, field: str = "pkey", membership: Membership | None = None) -> PKey:
        """Parse a tenant PKey. Strings are hexadecimal (with or without 0x); ints are taken as is."""
        if isinstance(raw, str):
            text = raw.strip().lower()
            if not text or not _HEX_RE.fullmatch(text):
                raise ValidationError(field, raw, cls.ALLOWED, "not a hexadecimal number")
            n = int(text.removeprefix("0x"), 16)
        else:
            n = _to_int(field, raw, cls.ALLOWED)
        if not 0 <= n <= 0xFFFF:
            raise ValidationError(field, raw, cls.ALLOWED, "more than 16 bits")
        base = n & 0x7FFF
        if not cls.MIN <= base <= cls.MAX:
            raise ValidationError(field, raw, cls.ALLOWED, "reserved key")
        return cls(base, membership or Membership.FULL)

    @classmethod
    def from_table_entry(cls, entry: int) -> PKey:
        """From a raw 16-bit PKey table entry: the top bit is the membership."""
        m = Membership.FULL if entry & 0x8000 else Membership.LIMITED
        return cls(entry & 0x7FFF, m)

    @property
    def table_entry(self) -> int:
        """The 16-bit value a port's PKey table holds for this key."""
        return self.value | (0x8000 if self.membership is Membership.FULL else 0)

    def with_membership(self, m: Membership) -> PKey:
        return PKey(self.value, m)

    def __str__(self) -> str:
        return _hex16(self.value)


def _hex16(v: int) -> str:
    return f"0x{v:04x}"


@dataclass(frozen=True, order=True)
class Guid:
    """A 64-bit EUI-64 (node or port GUID). Canonical form: ``0x`` + 16 lower-case hex digits.

    Accepts "0x0002c90300000001", "0002c90300000001", "00:02:c9:03:00:00:00:01" and
    the sysfs/ibstat form "0002:c903:0000:0001", and ints.
    """

    value: int

    ALLOWED: Final = "64-bit hex, e.g. 0x0002c90300000001 or 00:02:c9:03:00:00:00:01"

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise ValidationError("guid", self.value, self.ALLOWED, "not an integer")
        if not 0 <= self.value <= 0xFFFF_FFFF_FFFF_FFFF:
            raise ValidationError("guid", self.value, self.ALLOWED, "more than 64 bits")

    @classmethod
    def parse(cls, raw: str | int, field: str = "guid") -> Guid:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return cls(raw) if 0 <= raw <= 0xFFFF_FFFF_FFFF_FFFF else _bad_guid(field, raw)
        if not isinstance(raw, str):
            return _bad_guid(field, raw)
        text = raw.strip().lower()
        if ":" in text:
            groups = text.split(":")
            if len(groups) == 8 and all(re.fullmatch(r"[0-9a-f]{2}", g) for g in groups):
                return cls(int("".join(groups), 16))
            if len(groups) == 4 and all(re.fullmatch(r"[0-9a-f]{4}", g) for g in groups):
                return cls(int("".join(groups), 16))
            return _bad_guid(field, raw)
        digits = text.removeprefix("0x")
        if not re.fullmatch(r"[0-9a-f]{1,16}", digits):
            return _bad_guid(field, raw)
        return cls(int(digits, 16))

    def __str__(self) -> str:
        return f"0x{self.value:016x}"


def _bad_guid(field: str, raw: object) -> Guid:
    raise ValidationError(field, raw, Guid.ALLOWED)


@dataclass(frozen=True, order=True)
class NvlinkPartitionId:
    """A Fabric Manager partition id (Shared NVSwitch model), 0–65535."""

    value: int

    ALLOWED: Final = "0-65535"

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, int) or not 0 <= self.value <= 0xFFFF:
            raise ValidationError("nvlink_partition", self.value, self.ALLOWED)

    @classmethod
    def parse(cls, raw: str | int) -> NvlinkPartitionId:
        return cls(_to_int("nvlink_partition", raw, cls.ALLOWED))

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True, order=True)
class ModuleId:
    """A GPU's physical module id as Fabric Manager reports it (1–8 on an HGX baseboard; up to 64 allowed)."""

    value: int

    ALLOWED: Final = "1-64"

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, int) or not 1 <= self.value <= 64:
            raise ValidationError("module_id", self.value, self.ALLOWED)

    @classmethod
    def parse(cls, raw: str | int) -> ModuleId:
        return cls(_to_int("module_id", raw, cls.ALLOWED))

    def __str__(self) -> str:
        return str(self.value)


_NAME_RE: Final = re.compile(r"[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?")
NAME_ALLOWED: Final = "1-63 chars of a-z 0-9 . _ -, starting and ending alphanumeric"


def check_name(field: str, raw: str) -> str:
    """Validate a resource name (tenant, node, network, offering)."""
    if not isinstance(raw, str) or not _NAME_RE.fullmatch(raw):
        raise ValidationError(field, raw, NAME_ALLOWED)
    return raw


DESCRIPTION_MAX: Final = 255
DESCRIPTION_PATTERN: Final = r"^[^\x00-\x1f\x7f]*$"
DESCRIPTION_ALLOWED: Final = f"0-{DESCRIPTION_MAX} characters, no control characters"
TAG_PATTERN: Final = r"^[A-Za-z0-9._:=@+-]{1,60}$"
TAGS_MAX: Final = 32
TAG_ALLOWED: Final = "1-60 chars of A-Z a-z 0-9 . _ : = @ + -"
TAGS_ALLOWED: Final = f"at most {TAGS_MAX} tags, each {TAG_ALLOWED}"
_DESCRIPTION_RE: Final = re.compile(DESCRIPTION_PATTERN)
_TAG_RE: Final = re.compile(TAG_PATTERN)


def check_description(field: str, raw: str) -> str:
    """A free-text description (a network's; Neutron's limit): one line of printable text."""
    if not isinstance(raw, str) or len(raw) > DESCRIPTION_MAX or not _DESCRIPTION_RE.fullmatch(raw):
        raise ValidationError(field, raw, DESCRIPTION_ALLOWED)
    try:
        raw.encode()
    except UnicodeEncodeError:  # a lone surrogate (JSON's "\ud800") no store can hold
        raise ValidationError(field, raw, DESCRIPTION_ALLOWED, "not UTF-8") from None
    return raw


def check_tags(field: str, raw: object) -> tuple[str, ...]:
    """A set of tags in the order given, repeats dropped (``field``: where they came from)."""
    if isinstance(raw, str) or not isinstance(raw, (list, tuple)):
        raise ValidationError(field, raw, TAGS_ALLOWED, "not a list")
    tags = tuple(dict.fromkeys(raw))
    for t in tags:
        if not isinstance(t, str) or not _TAG_RE.fullmatch(t):
            raise ValidationError(field, t, TAG_ALLOWED)
    if len(tags) > TAGS_MAX:
        raise ValidationError(field, len(tags), TAGS_ALLOWED, "too many")
    return tags


_MAC_RE: Final = re.compile(r"[0-9a-f]{2}(:[0-9a-f]{2}){5}")


def check_mac(field: str, raw: str) -> str:
    text = str(raw).strip().lower().replace("-", ":")
    if not _MAC_RE.fullmatch(text):
        raise ValidationError(field, raw, "six colon-separated hex octets, e.g. 52:54:00:12:34:56")
    return text


# ---------------------------------------------------------------------- switch port names
PORT_ALLOWED: Final = "1-64 chars of A-Z a-z 0-9 / . _ : - starting alphanumeric"
_PORT_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9/._:-]{0,63}")


@dataclass(frozen=True)
class PortNaming:
    """The interface names one switch CLI accepts: a full-match regex and an example for the error. Each
    dialect states its own (``fabrics/ethernet/drivers/ssh/dialects/<name>.yaml``, ``port_names``)."""

    dialect: str
    pattern: str
    example: str

    def __post_init__(self) -> None:
        try:
            re.compile(self.pattern)
        except re.error as e:
            raise ValidationError(f"dialect {self.dialect}.port_names.pattern", self.pattern, "a regular expression") from e

    def matches(self, name: str) -> bool:
        return re.fullmatch(self.pattern, name) is not None  # compiled once: ``re`` caches it


def check_port_name(field: str, raw: object, naming: PortNaming | None = None) -> str:
    """A switch port name: the generic safe form, and its dialect's own form when known."""
    if not isinstance(raw, str) or not _PORT_RE.fullmatch(raw):
        raise ValidationError(field, raw, PORT_ALLOWED)
    if naming is not None and not naming.matches(raw):
        raise ValidationError(field, raw, f"a {naming.dialect} interface name, e.g. {naming.example}")
    return raw


# ---------------------------------------------------------------------- ids and descriptions
ID_MAX: Final = 2**63 - 1
ID_ALLOWED: Final = f"an integer 1-{ID_MAX}"


def check_id(field: str, raw: object) -> int:
    """A database id (lease, move, ...): a positive integer that fits a signed 64-bit column."""
    if isinstance(raw, bool):
        raise ValidationError(field, raw, ID_ALLOWED)
    if isinstance(raw, str):
        if not re.fullmatch(r"[0-9]{1,19}", raw.strip()):
            raise ValidationError(field, raw, ID_ALLOWED)
        raw = int(raw.strip())
    if not isinstance(raw, int) or not 1 <= raw <= ID_MAX:
        raise ValidationError(field, raw, ID_ALLOWED)
    return raw


NODE_DESCRIPTION_MAX: Final = 64  # NodeDescription is a 64-byte SMP attribute
_DESC_RE: Final = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]{0,62}[\x21-\x7e])?")


def check_node_description(field: str, raw: object) -> str:
    """An InfiniBand node description: printable ASCII, at most 64 bytes, no control characters."""
    if not isinstance(raw, str) or not _DESC_RE.fullmatch(raw):
        raise ValidationError(field, raw, "1-64 printable ASCII characters (no control characters)")
    return raw
