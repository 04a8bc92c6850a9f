"""The InfiniBand kind's section of config.yaml's ``segments:``: the global segmentation-id pool
and its PKey mapping, with their defaults::

    segments:
      infiniband: {seg_range: 3000-3999, mapping: {mode: offset, base: "0x0a00"}}
      # or mapping: {mode: table, table: {3000: "0x0a00", 3001: "0x0b17"}}

Neutron (and so ESI) only knows integer segmentation ids, while InfiniBand isolates with 15-bit
PKeys. Every InfiniBand segment gets a "fake VLAN" id from a range disjoint from the VLAN pools
(the core checks the range this section claims against ``user_vlan_range`` and the Ethernet
kind's claims) and maps it to a PKey, either by offset (``pkey = base + (seg - range.start)``)
or by an explicit table (:class:`PKeyMapping`). An instance with a pool of its own in
``fabrics.yaml`` is parsed by the same :meth:`PKeyMapping.from_dict` (:mod:`.pools`); one
without allocates from this one (:func:`global_section`). Every error names the offending field.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.models import Segment
from gpufabric.domain.segments import SECTION, Claim, IdRange, SegmentSection, check_vlan_ids, known_keys
from gpufabric.domain.values import PKey

DEFAULT_SEG_RANGE: Final = "3000-3999"  # ``seg_range`` of the global pool when config.yaml has none
DEFAULT_BASE: Final = "0x0a00"  # ``mapping.base`` (mode offset) when none is given
POOL_KEYS: Final = ("seg_range", "mapping")
MAPPING_KEYS: Final = ("mode", "base", "table")
PKEY: Final = "infiniband.pkey"
"""The scope of an InfiniBand segment's key (its 15-bit PKey): one network's on every subnet."""


def pkey_segment(instance: str, seg_id: int, pkey: PKey | int, options: tuple[tuple[str, int | bool], ...] = ()) -> Segment:
    """A network's segment on the InfiniBand instance ``instance``: segmentation id ``seg_id``
    mapped to ``pkey`` (kept without its membership bit)."""
    return Segment(instance, seg_id, (pkey.value if isinstance(pkey, PKey) else pkey) & 0x7FFF, PKEY, options)


def segment_pkey(seg: Segment) -> PKey | None:
    """The PKey of an InfiniBand segment (None: a segment of no PKey)."""
    return PKey(seg.key) if seg.key is not None and seg.scope == PKEY else None


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
        mode_raw, base, table = m.get("mode", "offset"), m.get("base", DEFAULT_BASE), m.get("table", {})
        try:
            mode = MappingMode(mode_raw)
        except ValueError:
            raise ConfigError(f"{where}.mapping.mode", mode_raw, "offset or table") from None
        if mode is MappingMode.OFFSET:  # base read, table ignored
            return cls(mode, seg_range, _pkey_int(f"{where}.mapping.base", base))
        return cls(mode, seg_range, 0, tuple(_table(f"{where}.mapping.table", table)))

    def validate(self, where: str) -> None:
        """The pool on its own: ids inside the VLAN id space (never VLAN 1), PKeys valid and one
        per id; errors name fields under ``where`` (as :meth:`from_dict`)."""
        sr = self.seg_range
        check_vlan_ids(f"{where}.seg_range", sr)
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

    def pkeys_text(self) -> str:
        r = self.pkey_range()
        return f"0x{r.start:04x}-0x{r.end:04x}"


@dataclass(frozen=True)
class IbSegments(SegmentSection):
    """config.yaml's ``segments.infiniband``: the global pool, shared by every instance without
    one of its own; ``where`` names its keys (``infiniband``)."""

    pool: PKeyMapping
    where: str

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> IbSegments:
        """Keys outside ``seg_range``/``mapping`` (and ``mode``/``base``/``table`` in
        ``mapping``) refused naming ``segments.<where>...``; then :meth:`PKeyMapping.from_dict`
        with the default range, validated."""
        known_keys(f"{SECTION}.{where}", raw, POOL_KEYS)
        m = raw.get("mapping") if isinstance(raw, Mapping) else None
        known_keys(f"{SECTION}.{where}.mapping", m, MAPPING_KEYS)
        pool = PKeyMapping.from_dict(where, raw, DEFAULT_SEG_RANGE)
        pool.validate(where)
        return cls(pool, where)

    @property
    def field(self) -> str:
        """The key naming the pool's range (an exhausted pool's error names it)."""
        return f"{self.where}.seg_range"

    def claims(self) -> Sequence[Claim]:
        return (Claim(self.field, self.pool.seg_range),)

    def describe(self) -> str:
        p = self.pool
        return f"InfiniBand seg ids {p.seg_range} -> PKeys {p.pkeys_text()} ({p.mode.value})"


def global_section(config: Any) -> IbSegments:
    """config.yaml's pool, from ``config`` (the deployment's ``SegmentConfig``)."""
    section: IbSegments = config.of(IbSegments)
    return section


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
