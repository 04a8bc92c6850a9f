"""Segment pools per InfiniBand subnet: which segmentation ids (and so PKeys) an instance
hands out, and the check that several subnets' pools stay apart.

An instance's ``fabrics.yaml`` section may carry a pool of its own, in the grammar of
config.yaml's ``segments.infiniband`` (parsed by the same
:meth:`~.segments.PKeyMapping.from_dict`)::

    fabrics:
      - {name: ib-compute, kind: infiniband, driver: opensm, options: {...},
         segments: {seg_range: "3000-3499", mapping: {mode: offset, base: "0x0a00"}}}
      - {name: ib-storage, kind: infiniband, driver: opensm, options: {...},
         segments: {seg_range: "3500-3999", mapping: {mode: offset, base: "0x0c00"}}}

Without one the instance uses the global pool (:class:`~.segments.IbSegments`), shared with every other
instance without one (allocations there are kept unique across the siblings, as before).
Checked at load (:func:`check_pools`): every pool valid on its own, each own seg_range clear of
the VLAN pools (user, tenant Ethernet, quarantine), and the seg ranges and PKeys of the pools in
use pairwise disjoint, so that a segmentation id (Neutron's) names its subnet and no PKey is
handed out on two subnets. Errors name ``fabrics.<instance>.segments...``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.segments import SegmentConfig
from gpufabric.fabrics.infiniband.segments import POOL_KEYS, IbSegments, MappingMode, PKeyMapping, global_section


def pool_field(instance: str) -> str:
    """Where an instance's own pool is configured (the prefix of its errors' fields)."""
    return f"fabrics.{instance}.segments"


def own_pool(instance: str, section: Any) -> PKeyMapping | None:
    """The validated pool of ``instance``'s own ``segments:`` (None: it has none)."""
    raw = section.get("segments") if isinstance(section, Mapping) else None
    if raw is None:
        return None
    where = pool_field(instance)
    if isinstance(raw, Mapping) and (extra := sorted(set(map(str, raw)) - set(POOL_KEYS))):
        raise ConfigError(f"{where}.{extra[0]}", raw[extra[0]], f"the keys {' and '.join(POOL_KEYS)}")
    pool = PKeyMapping.from_dict(where, raw)
    pool.validate(where)
    return pool


def check_pools(sections: Mapping[str, Any], cfg: SegmentConfig | None) -> None:
    """Refuse per-instance pools that overlap each other, the global pool some instance still
    uses, or (with ``cfg``) the VLAN pools: a one-line ConfigError naming the later instance's
    field and the range it overlaps."""
    own = {name: p for name, section in sections.items() if (p := own_pool(name, section)) is not None}
    if not own:
        return  # every instance on the global pool: checked by SegmentConfig, unique across siblings
    pools: list[tuple[str, str, PKeyMapping]] = []  # (field prefix, who uses it when shared, pool)
    shared = [name for name in sections if name not in own]
    if cfg is not None:
        glob = global_section(cfg)
        for name, p in own.items():
            cfg.check_clear(f"{pool_field(name)}.seg_range", p.seg_range, besides=glob)
        if shared:
            pools.append((glob.where, f" of config.yaml, the pool of {', '.join(shared)}", glob.pool))
    pools += [(pool_field(name), "", p) for name, p in own.items()]
    for i, (where, _, pool) in enumerate(pools):
        for other_where, other_name, other in pools[:i]:
            if pool.seg_range.overlaps(other.seg_range):
                raise ConfigError(
                    f"{where}.seg_range", str(pool.seg_range),
                    "a range disjoint from every other InfiniBand instance's pool",
                    f"overlaps {other_where}.seg_range {other.seg_range}{other_name}",
                )  # fmt: skip
            if common := pool.pkeys() & other.pkeys():
                field = "mapping.base" if pool.mode is MappingMode.OFFSET else "mapping.table"
                raise ConfigError(
                    f"{where}.{field}", f"PKeys {pool.pkeys_text()}",
                    "PKeys disjoint from every other InfiniBand instance's pool",
                    f"PKey 0x{min(common):04x} is also in {other_where} PKeys {other.pkeys_text()}{other_name}",
                )  # fmt: skip


def pool_of(instance: str, own: PKeyMapping | None, cfg: SegmentConfig) -> tuple[PKeyMapping, str]:
    """The pool ``instance`` allocates and adopts from, and the field naming its range: its own
    (:func:`own_pool`, ``fabrics.<instance>.segments.seg_range``), else the global one
    (``infiniband.seg_range``)."""
    if own is None:
        glob: IbSegments = global_section(cfg)
        return glob.pool, glob.field
    return own, f"{pool_field(instance)}.seg_range"
