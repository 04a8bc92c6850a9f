"""The Ethernet kind's section of config.yaml's ``segments:``: the tenant VLAN pool and the
quarantine VLAN, with their defaults (the one source of each)::

    segments:
      ethernet: {vlan_range: 2000-2999, quarantine_vlan: 4000}

``vlan_range``: the VLANs networks get, one each, unique deployment-wide (``allocate``/``adopt``);
``quarantine_vlan``: the VLAN the ports of a node in no tenant are parked on. Both are claimed
(:class:`~gpufabric.domain.segments.Claim`): disjoint from ``user_vlan_range`` and from the other
kinds' ranges. The quarantine VLAN reaches the kind's desired state, audit and drivers as
``settings["quarantine_vlan"]`` (:meth:`EthernetSegments.settings`); without one the kind and the
lab use :data:`DEFAULT_QUARANTINE_VLAN`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.models import Segment
from gpufabric.domain.segments import SECTION, Claim, IdRange, SegmentSection, check_vlan_ids, known_keys
from gpufabric.domain.values import VlanId

DEFAULT_QUARANTINE_VLAN: Final = 4000  # ``quarantine_vlan`` when config.yaml has none: the one source
DEFAULT_VLAN_RANGE: Final = "2000-2999"  # ``vlan_range`` when config.yaml has none
KEYS: Final = ("vlan_range", "quarantine_vlan")
SETTING: Final = "quarantine_vlan"  # the quarantine VLAN's key in ``Tenancy.settings`` and the drivers' options
VLAN: Final = "ethernet.vlan"
"""The scope of an Ethernet segment's key (its VLAN): one network's on every Ethernet instance."""


def vlan_segment(instance: str, seg_id: int, vlan: int | None = None, options: tuple[tuple[str, int | bool], ...] = ()) -> Segment:
    """A network's segment on the Ethernet instance ``instance``: VLAN ``vlan`` (default ``seg_id``)."""
    return Segment(instance, seg_id, seg_id if vlan is None else vlan, VLAN, options)


def vlan_of(seg: Segment) -> int:
    """The VLAN an Ethernet segment takes from the pool (its key, else its segmentation id)."""
    return seg.key if seg.key is not None and seg.scope == VLAN else seg.seg_id


def segment_vlan(seg: Segment) -> VlanId | None:
    """The VLAN of an Ethernet segment (None: a segment of no VLAN)."""
    return VlanId(seg.key) if seg.key is not None and seg.scope == VLAN else None


@dataclass(frozen=True)
class EthernetSegments(SegmentSection):
    """The validated section: tenant VLANs and the quarantine VLAN; ``where`` names its keys."""

    vlans: IdRange
    quarantine: VlanId
    where: str

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> EthernetSegments:
        raw = {} if raw is None else raw
        if not isinstance(raw, Mapping):
            raise ConfigError(where, raw, f"a mapping with keys {', '.join(KEYS)}")
        known_keys(f"{SECTION}.{where}", raw, KEYS)
        vlans = IdRange.parse(f"{where}.vlan_range", raw.get("vlan_range", DEFAULT_VLAN_RANGE))
        qv = raw.get("quarantine_vlan", DEFAULT_QUARANTINE_VLAN)
        try:
            quarantine = VlanId.parse(qv, field=f"{where}.quarantine_vlan")
        except ValidationError as e:
            raise ConfigError(e.field, e.value, e.allowed) from None
        check_vlan_ids(f"{where}.vlan_range", vlans)
        if quarantine.value == 1:
            raise ConfigError(f"{where}.quarantine_vlan", 1, "2-4094 (never VLAN 1)")
        return cls(vlans, quarantine, where)

    def field(self, key: str) -> str:
        return f"{self.where}.{key}"

    def claims(self) -> Sequence[Claim]:
        q = self.quarantine.value
        return (Claim(self.field("vlan_range"), self.vlans), Claim(self.field(SETTING), IdRange(q, q), "the quarantine VLAN"))

    def settings(self) -> Mapping[str, Any]:
        return {SETTING: self.quarantine.value}

    def describe(self) -> str:
        return f"tenant VLANs {self.vlans}, quarantine VLAN {self.quarantine}"

