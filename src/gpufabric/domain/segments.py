"""Segment pools per fabric and the segmentation-id <-> PKey mapping.

Neutron (and so ESI) only knows integer segmentation ids, while InfiniBand isolates
with 15-bit PKeys. gpufabric gives every InfiniBand segment a "fake VLAN" id from a
range disjoint from the user VLAN range and maps it to a PKey, either by offset
(``pkey = base + (seg - range.start)``) or by an explicit table. All of it is
validated when loaded; every error names the offending range.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpufabric.domain.errors import ConfigError, ExhaustedError, ValidationError
from gpufabric.domain.values import PKey, VlanId

DEFAULT_QUARANTINE_VLAN = 4000  # ``ethernet.quarantine_vlan`` when config.yaml has none: the one source
DEFAULT_IB_SEG_RANGE = "3000-3999"  # ``infiniband.seg_range`` when config.yaml has none

@dataclass(frozen=True, order=True)
class IdRange:
    """An inclusive integer range."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ConfigError("range", f"{self.start}-{self.end}", "start <= end")

    def __contains__(self, v: object) -> bool:
        return isinstance(v, int) and self.start <= v <= self.end

    def __len__(self) -> int:
        return self.end - self.start + 1

    def overlaps(self, other: IdRange) -> bool:
        return self.start <= other.end and other.start <= self.end

    def __str__(self) -> str:
        return f"{self.start}-{self.end}"

    @classmethod
    def parse(cls, field: str, raw: Any) -> IdRange:
        try:
            if isinstance(raw, str):
                a, b = raw.split("-", 1)
                return cls(int(a, 0), int(b, 0))
            if isinstance(raw, Mapping):
                return cls(int(raw["start"]), int(raw["end"]))
            a, b = raw
            return cls(int(a), int(b))
        except ConfigError as e:
            raise ConfigError(field, raw, e.allowed) from None
        except (ValueError, TypeError, KeyError):
            raise ConfigError(field, raw, "'START-END' or [start, end]") from None


class MappingMode(enum.StrEnum):
    OFFSET = "offset"
    TABLE = "table"


@dataclass(frozen=True)
class PKeyMapping:
    """Maps InfiniBand segmentation ids (fake VLANs) to PKeys and back."""

    mode: MappingMode
    seg_range: IdRange
    base: int = 0
    table: tuple[tuple[int, int], ...] = ()  # (seg_id, pkey value), for mode table

    def pkey_for(self, seg_id: int) -> PKey:
        if seg_id not in self.seg_range:
            raise ConfigError("infiniband.seg_id", seg_id, str(self.seg_range))
        if self.mode is MappingMode.OFFSET:
            return PKey(self.base + (seg_id - self.seg_range.start))
        for s, p in self.table:
            if s == seg_id:
                return PKey(p)
        raise ConfigError("infiniband.seg_id", seg_id, "a segmentation id listed in infiniband.mapping.table")

    def seg_for(self, pkey: PKey) -> int:
        if self.mode is MappingMode.OFFSET:
            seg = pkey.value - self.base + self.seg_range.start
            if seg in self.seg_range:
                return seg
        else:
            for s, p in self.table:
                if p == pkey.value:
                    return s
        raise ConfigError("infiniband.pkey", str(pkey), f"a PKey mapped from {self.seg_range}")

    def seg_ids(self) -> list[int]:
        if self.mode is MappingMode.OFFSET:
            return list(range(self.seg_range.start, self.seg_range.end + 1))
        return sorted(s for s, _ in self.table)

    def pkey_range(self) -> IdRange:
        if self.mode is MappingMode.OFFSET:
            return IdRange(self.base, self.base + len(self.seg_range) - 1)
        vals = [p for _, p in self.table]
        return IdRange(min(vals), max(vals))

    def pkeys(self) -> frozenset[int]:
        """Every PKey value this mapping hands out."""
        if self.mode is MappingMode.OFFSET:
            return frozenset(range(self.base, self.base + len(self.seg_range)))
        return frozenset(p for _, p in self.table)

    @classmethod
    def from_dict(cls, where: str, raw: Any, default_range: str | None = None) -> PKeyMapping:
        """Parse ``{seg_range, mapping: {mode, base | table}}`` (the ``segments.infiniband``
        section of config.yaml, ``where`` = ``infiniband``, or an InfiniBand instance's own pool
        in fabrics.yaml, ``where`` = ``fabrics.<instance>.segments``); every error names a field
        under ``where``. Not validated (:meth:`validate`). ``default_range`` None: seg_range
        is required."""
        raw = {} if raw is None else raw
        if not isinstance(raw, Mapping):
            raise ConfigError(where, raw, "a mapping with seg_range and mapping")
        if default_range is None and "seg_range" not in raw:
            raise ConfigError(f"{where}.seg_range", "missing", "'START-END' segmentation ids of this pool")
        seg_range = IdRange.parse(f"{where}.seg_range", raw.get("seg_range", default_range))
        m = raw.get("mapping", {}) or {}
        if not isinstance(m, Mapping):
            raise ConfigError(f"{where}.mapping", m, "a mapping with mode and base (offset) or table")
        mode_raw = m.get("mode", "offset")
        try:
            mode = MappingMode(mode_raw)
        except ValueError:
            raise ConfigError(f"{where}.mapping.mode", mode_raw, "offset or table") from None
        if mode is MappingMode.OFFSET:
            return cls(mode, seg_range, _pkey_int(f"{where}.mapping.base", m.get("base", "0x0a00")))
        return cls(mode, seg_range, 0, tuple(_table(f"{where}.mapping.table", m.get("table", {}))))

    def validate(self, where: str) -> None:
        """The pool on its own: ids inside the VLAN id space (never VLAN 1), PKeys valid and one
        per id; errors name fields under ``where`` (as :meth:`from_dict`)."""
        sr = self.seg_range
        if sr.start < VlanId.MIN or sr.end > VlanId.MAX:
            raise ConfigError(f"{where}.seg_range", str(sr), f"inside {VlanId.ALLOWED}")
        if 1 in sr:  # VLAN 1 is every switch's default VLAN: the audit flags any port carrying it
            raise ConfigError(f"{where}.seg_range", str(sr), "inside 2-4094 (never VLAN 1, the default VLAN)")
        if self.mode is MappingMode.OFFSET:
            pr = self.pkey_range()
            if pr.start < PKey.MIN or pr.end > PKey.MAX:
                raise ConfigError(
                    f"{where}.mapping.base",
                    f"0x{self.base:04x} (+{len(sr) - 1} = 0x{pr.end:04x})",
                    f"PKeys inside {PKey.ALLOWED}",
                )
            return
        field = f"{where}.mapping.table"
        seen: dict[int, int] = {}
        for s, p in self.table:
            if s not in sr:
                raise ConfigError(field, s, f"segmentation ids inside {where}.seg_range {sr}")
            if not PKey.MIN <= p <= PKey.MAX:
                raise ConfigError(field, f"{s}: 0x{p:04x}", PKey.ALLOWED)
            if p in seen:
                raise ConfigError(field, f"{s}: 0x{p:04x}", f"one PKey per id (0x{p:04x} also maps {seen[p]})")
            seen[p] = s
        if not self.table:
            raise ConfigError(field, "{}", "at least one 'seg_id: pkey' entry")


SECTION_KEYS: Final = ("user_vlan_range", "ethernet", "infiniband")
VLAN_KEYS: Final = ("vlan_range", "quarantine_vlan")
POOL_KEYS: Final = ("seg_range", "mapping")
MAPPING_KEYS: Final = ("mode", "base", "table")
"""The keys of config.yaml's ``segments:`` (tests/unit/test_config_reference.py holds them to the
keys its parser reads, which docs/config-reference.md lists)."""


def _known(where: str, raw: Any, keys: tuple[str, ...]) -> None:
    """A ConfigError naming ``where.<key>`` for a key of ``raw`` not in ``keys`` (a non-mapping is its parser's to refuse)."""
    for k in raw if isinstance(raw, Mapping) else ():
        if k not in keys:
            raise ConfigError(f"{where}.{k}", raw[k], f"known keys only: {', '.join(sorted(keys))}")


@dataclass(frozen=True)
class SegmentConfig:
    """Validated pools: user VLANs (left to users/Neutron), tenant Ethernet VLANs, the
    quarantine VLAN, and the InfiniBand fake-VLAN range with its PKey mapping."""

    user_vlans: IdRange
    ethernet_vlans: IdRange
    quarantine_vlan: VlanId
    ib: PKeyMapping

    @classmethod
    def default(cls) -> SegmentConfig:
        return cls.from_dict({})

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SegmentConfig:
        """The ``segments:`` section of config.yaml; a key it does not know is refused (a typo
        would silently leave a default in force). NVLink partitions are not pooled here: each
        node's come from its baseboard's table (``nvlink_baseboard``)."""
        _known("segments", raw, SECTION_KEYS)
        eth = raw.get("ethernet", {}) or {}
        ib = raw.get("infiniband", {}) or {}
        _known("segments.ethernet", eth, VLAN_KEYS)
        _known("segments.infiniband", ib, POOL_KEYS)
        _known("segments.infiniband.mapping", ib.get("mapping") or {}, MAPPING_KEYS)
        user = IdRange.parse("user_vlan_range", raw.get("user_vlan_range", "2-1999"))
        vlans = IdRange.parse("ethernet.vlan_range", eth.get("vlan_range", "2000-2999"))
        qv = eth.get("quarantine_vlan", DEFAULT_QUARANTINE_VLAN)
        try:
            quarantine = VlanId.parse(qv, field="ethernet.quarantine_vlan")
        except ValidationError as e:
            raise ConfigError(e.field, e.value, e.allowed) from None
        pool = PKeyMapping.from_dict("infiniband", ib, DEFAULT_IB_SEG_RANGE)
        cfg = cls(user, vlans, quarantine, pool)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Check the pools against each other; the error names the offending range."""
        for name, r in (
            ("user_vlan_range", self.user_vlans),
            ("ethernet.vlan_range", self.ethernet_vlans),
        ):
            if r.start < VlanId.MIN or r.end > VlanId.MAX:
                raise ConfigError(name, str(r), f"inside {VlanId.ALLOWED}")
            if 1 in r:  # VLAN 1 is every switch's default VLAN: the audit flags any port carrying it
                raise ConfigError(name, str(r), "inside 2-4094 (never VLAN 1, the default VLAN)")
        if self.ethernet_vlans.overlaps(self.user_vlans):
            raise ConfigError(
                "ethernet.vlan_range", str(self.ethernet_vlans), f"disjoint from user_vlan_range {self.user_vlans}"
            )
        q = self.quarantine_vlan.value
        if q == 1:
            raise ConfigError("ethernet.quarantine_vlan", q, "2-4094 (never VLAN 1)")
        if q in self.user_vlans or q in self.ethernet_vlans:
            raise ConfigError("ethernet.quarantine_vlan", q, f"outside {self.user_vlans} and {self.ethernet_vlans}")
        self.ib.validate("infiniband")
        self.check_seg_range("infiniband.seg_range", self.ib.seg_range)

    def check_seg_range(self, field: str, sr: IdRange) -> None:
        """An InfiniBand segmentation-id range (the global one, or an instance's own, ``field``)
        must stay clear of the VLAN pools: disjoint from the user and tenant VLAN ranges, and
        without the quarantine VLAN."""
        if sr.overlaps(self.user_vlans):
            raise ConfigError(field, str(sr), f"disjoint from user_vlan_range {self.user_vlans}")
        if sr.overlaps(self.ethernet_vlans):
            raise ConfigError(field, str(sr), f"disjoint from ethernet.vlan_range {self.ethernet_vlans}")
        q = self.quarantine_vlan.value
        if q in sr:
            raise ConfigError(field, str(sr), f"not containing the quarantine VLAN {q}")


def _pkey_int(field: str, raw: Any) -> int:
    """A configured PKey (hex string or int; a set full-member bit is accepted)."""
    try:
        return PKey.parse(raw, field=field).value
    except ValidationError as e:
        raise ConfigError(e.field, e.value, e.allowed) from None


def _table(field: str, raw: Any) -> Iterable[tuple[int, int]]:
    if not isinstance(raw, Mapping):
        raise ConfigError(field, raw, "a mapping of seg_id: pkey")
    for k, v in raw.items():
        try:
            seg = int(k)
        except (TypeError, ValueError):
            raise ConfigError(field, k, "integer segmentation ids") from None
        yield seg, _pkey_int(f"{field}[{seg}]", v)


def allocate(pool: Iterable[int], used: Iterable[int], field: str) -> int:
    """Return the lowest id of ``pool`` not in ``used`` (pure)."""
    taken = set(used)
    for v in pool:
        if v not in taken:
            return v
    raise ExhaustedError(f"no free value left in {field}", field=field)
