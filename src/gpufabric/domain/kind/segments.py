"""The segments facet of a fabric kind: its section of config.yaml's ``segments:``
(:mod:`gpufabric.domain.segments`), the segment it gives a network (allocated or adopted), a
network's own options on it, and how a segment reads."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.kind.identity import KindIdentity
from gpufabric.domain.models import Network, Segment
from gpufabric.domain.segments import SegmentSection


class KindSegments(KindIdentity):
    """Where a network's segment on this kind's instances comes from."""

    def segment_config(self, raw: Any, where: str) -> SegmentSection:
        """This kind's section ``segments.<where>`` of config.yaml (None: absent) parsed with its defaults and validated
        on its own; what the core does with it: :mod:`gpufabric.domain.segments`. Default: the kind takes none."""
        raise ConfigError(
            f"segments.{where}", raw, f"a fabric kind that takes a segments section ({self.name} takes none)"
        )

    def allocate(self, network: Network, used: Collection[Segment], config: Any) -> Segment | None:
        """A new segment for ``network`` on this fabric (None: this fabric has no
        per-network segment). ``used`` are every network's segments on this fabric."""
        return None

    def adopt(self, network: Network, seg_id: int, used: Collection[Segment], config: Any) -> Segment:
        """The segment ``seg_id`` given explicitly for ``network`` on this instance (an adopted
        segmentation id, the Neutron integration's): a ValidationError naming
        ``segments.<instance>.seg_id`` out of range, a ConflictError when ``used`` (every
        network's segments on this kind's instances) holds it. Default: refused."""
        raise ValidationError(
            "segments.fabric", self.instance, "a fabric that takes explicit segmentation ids",
            f"fabric {self.instance} does not take explicit segmentation ids",
        )  # fmt: skip

    def segment_options(self, raw: Mapping[str, Any], where: str) -> tuple[tuple[str, int | bool], ...]:
        """A network's own settings on this instance (``network create --option``, the API's
        ``options``), validated and normalized (sorted by key): a ValidationError naming
        ``<where>.<key>`` and its range, before anything is written. Default: none taken."""
        if raw:
            raise ValidationError(where, ", ".join(sorted(map(str, raw))), f"no options on fabric {self.instance}")
        return ()

    def segment_label(self, segment: Segment) -> str:
        """``segment`` as a person reads it (``network list``'s cell, the API's ``label``), e.g.
        ``vlan 2000`` or ``seg 3000 -> pkey 0x0a00``. Default: its segmentation id."""
        return f"seg {segment.seg_id}"

    def segment_view(self, segment: Segment) -> Mapping[str, Any]:
        """This kind's own fields of ``segment`` in the API's network answer (the Ethernet kind's
        ``vlan``, the InfiniBand kind's ``pkey``). Default: none."""
        return {}

    @property
    def takes_segments(self) -> bool:
        """True when this kind takes a section of ``segments:`` (overrides :meth:`segment_config`)."""
        return type(self).segment_config is not KindSegments.segment_config

    @property
    def allocates(self) -> bool:
        """True when this kind gives networks a segment of their own (overrides :meth:`allocate`):
        the instances a network may name (``network create --fabric``)."""
        return type(self).allocate is not KindSegments.allocate

    @property
    def adopts(self) -> bool:
        """True when this kind takes explicit segmentation ids (overrides :meth:`adopt`)."""
        return type(self).adopt is not KindSegments.adopt
