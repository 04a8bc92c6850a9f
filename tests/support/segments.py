"""Tests' shorthand for network segments in the old spelling: ``segment(instance, seg_id,
vlan=..., pkey=...)`` gives the Segment the Ethernet or InfiniBand kind makes (its key and
scope: ``fabrics/ethernet/segments.py``, ``fabrics/infiniband/segments.py``)."""

from __future__ import annotations

from gpufabric.domain.models import Segment
from gpufabric.domain.values import PKey, VlanId
from gpufabric.fabrics.ethernet.segments import vlan_segment
from gpufabric.fabrics.infiniband.segments import pkey_segment


def segment(
    fabric: str, seg_id: int, vlan: VlanId | int | None = None, pkey: PKey | int | None = None,
    options: tuple[tuple[str, int | bool], ...] = (),
) -> Segment:  # fmt: skip
    """The segment of ``seg_id`` on ``fabric``: with a VLAN (the Ethernet kind's), a PKey (the
    InfiniBand kind's) or neither (a kind with no key)."""
    if vlan is not None:
        return vlan_segment(fabric, seg_id, vlan.value if isinstance(vlan, VlanId) else vlan, options)
    if pkey is not None:
        return pkey_segment(fabric, seg_id, pkey, options)
    return Segment(fabric, seg_id, options=options)
