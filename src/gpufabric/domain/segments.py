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
from typing import Any

from gpufabric.domain.errors import ConfigError, ExhaustedError, ValidationError
from gpufabric.domain.values import PKey, VlanId

DEFAULT_QUARANTINE_VLAN = 4000  # ``ethernet.quarantine_vlan`` when config.yaml has none: the one source

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


@dataclass(frozen=True)
class SegmentConfig:
    """Validated pools: user VLANs (left to users/Neutron), tenant Ethernet VLANs, the
    quarantine VLAN, and the InfiniBand fake-VLAN range with its PKey mapping."""

    user_vlans: IdRange
    ethernet_vlans: IdRange
    quarantine_vlan: VlanId
    ib: PKeyMapping
    nvlink_partitions: IdRange

    @classmethod
    def default(cls) -> SegmentConfig:
        return cls.from_dict({})

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SegmentConfig:
        eth = raw.get("ethernet", {}) or {}
        ib = raw.get("infiniband", {}) or {}
        nv = raw.get("nvlink", {}) or {}
        user = IdRange.parse("user_vlan_range", raw.get("user_vlan_range", "2-1999"))
        vlans = IdRange.parse("ethernet.vlan_range", eth.get("vlan_range", "2000-2999"))
        qv = eth.get("quarantine_vlan", DEFAULT_QUARANTINE_VLAN)
        try:
            quarantine = VlanId.parse(qv, field="ethernet.quarantine_vlan")
        except ValidationError as e:
            raise ConfigError(e.field, e.value, e.allowed) from None
        seg_range = IdRange.parse("infiniband.seg_range", ib.get("seg_range", "3000-3999"))
        m = ib.get("mapping", {}) or {}
        mode_raw = m.get("mode", "offset")
        try:
            mode = MappingMode(mode_raw)
        except ValueError:
            raise ConfigError("infiniband.mapping.mode", mode_raw, "offset or table") from None
        table: tuple[tuple[int, int], ...] = ()
        base = 0
        if mode is MappingMode.OFFSET:
            base = _pkey_int("infiniband.mapping.base", m.get("base", "0x0a00"))
        else:
            table = tuple(_table(m.get("table", {})))
        nvr = IdRange.parse("nvlink.partition_range", nv.get("partition_range", "0-63"))
        cfg = cls(user, vlans, quarantine, PKeyMapping(mode, seg_range, base, table), nvr)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Check the pools against each other; the error names the offending range."""
        for name, r in (
            ("user_vlan_range", self.user_vlans),
            ("ethernet.vlan_range", self.ethernet_vlans),
            ("infiniband.seg_range", self.ib.seg_range),
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
        sr = self.ib.seg_range
        if sr.overlaps(self.user_vlans):
            raise ConfigError("infiniband.seg_range", str(sr), f"disjoint from user_vlan_range {self.user_vlans}")
        if sr.overlaps(self.ethernet_vlans):
            raise ConfigError(
                "infiniband.seg_range", str(sr), f"disjoint from ethernet.vlan_range {self.ethernet_vlans}"
            )
        if q in sr:
            raise ConfigError("infiniband.seg_range", str(sr), f"not containing the quarantine VLAN {q}")
        if self.ib.mode is MappingMode.OFFSET:
            pr = self.ib.pkey_range()
            if pr.start < PKey.MIN or pr.end > PKey.MAX:
                raise ConfigError(
                    "infiniband.mapping.base",
                    f"0x{self.ib.base:04x} (+{len(sr) - 1} = 0x{pr.end:04x})",
                    f"PKeys inside {PKey.ALLOWED}",
                )
        else:
            seen: dict[int, int] = {}
            for s, p in self.ib.table:
                if s not in sr:
                    raise ConfigError(
                        "infiniband.mapping.table", s, f"segmentation ids inside infiniband.seg_range {sr}"
                    )
                if not PKey.MIN <= p <= PKey.MAX:
                    raise ConfigError("infiniband.mapping.table", f"{s}: 0x{p:04x}", PKey.ALLOWED)
                if p in seen:
                    raise ConfigError(
                        "infiniband.mapping.table",
                        f"{s}: 0x{p:04x}",
                        f"one PKey per id (0x{p:04x} also maps {seen[p]})",
                    )
                seen[p] = s
            if not self.ib.table:
                raise ConfigError("infiniband.mapping.table", "{}", "at least one 'seg_id: pkey' entry")


def _pkey_int(field: str, raw: Any) -> int:
    """A configured PKey (hex string or int; a set full-member bit is accepted)."""
    try:
        return PKey.parse(raw, field=field).value
    except ValidationError as e:
        raise ConfigError(e.field, e.value, e.allowed) from None


def _table(raw: Any) -> Iterable[tuple[int, int]]:
    if not isinstance(raw, Mapping):
        raise ConfigError("infiniband.mapping.table", raw, "a mapping of seg_id: pkey")
    for k, v in raw.items():
        try:
            seg = int(k)
        except (TypeError, ValueError):
            raise ConfigError("infiniband.mapping.table", k, "integer segmentation ids") from None
        yield seg, _pkey_int(f"infiniband.mapping.table[{seg}]", v)


def allocate(pool: Iterable[int], used: Iterable[int], field: str) -> int:
    """Return the lowest id of ``pool`` not in ``used`` (pure)."""
    taken = set(used)
    for v in pool:
        if v not in taken:
            return v
    raise ExhaustedError(f"no free value left in {field}", field=field)
