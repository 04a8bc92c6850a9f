"""Which Neutron physnets are gpufabric's, and on which fabric *instance* (pure; no neutron).

gpufabric runs several instances of a fabric kind side by side (``fabrics.yaml``: e.g. the
InfiniBand subnets ``ib-compute`` and ``ib-storage``, each with its own SMs and PKeys); a
kind's default instance is named after the kind (``ethernet``, ``infiniband``). The driver
maps each physnet to one instance:

- ``ib_physnets = ib-compute:infiniband,ib-storage:ib-storage``: one physnet per IB subnet
  (``PHYSNET:INSTANCE``; a bare ``PHYSNET`` is the default instance ``infiniband``). Unset,
  the older single ``ib_physnet`` is the one IB physnet, on the default instance.
- ``ethernet_physnets = physnet1,physnet2:eth-storage``: the same form; several physnets may
  share one Ethernet instance (as before, every listed physnet is the default instance's).

A segment on a mapped physnet becomes ``{"fabric": INSTANCE, "seg_id": N}`` (gpufabric names a
segment's fabric by its instance: ``GET /networks`` shows them so), so a Neutron network with
segments on two IB physnets is one gpufabric network on both subnets, each id adopted on its
own subnet. :func:`parse` refuses a bad configuration with a one-line :class:`PhysnetError`
naming the option: a physnet listed twice, an instance name gpufabric would not accept, an IB
physnet that is also an Ethernet physnet, two IB physnets on one subnet, an instance of the
other kind's default name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

ETHERNET = "ethernet"
INFINIBAND = "infiniband"
_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$")  # gpufabric's instance (and object) names


class PhysnetError(ValueError):
    """A bad physnet mapping in ``[ml2_gpufabric]`` (the message names the option)."""


@dataclass(frozen=True)
class Physnets:
    """physnet -> gpufabric instance, per fabric kind."""

    ethernet: Mapping[str, str] = field(default_factory=dict)
    ib: Mapping[str, str] = field(default_factory=dict)

    def fabric_of(self, segment: Mapping[str, Any]) -> str | None:
        """``ethernet``, ``infiniband`` (the kind) or None (not gpufabric's) for one Neutron segment."""
        kind_instance = self.place(segment)
        return None if kind_instance is None else kind_instance[0]

    def instance_of(self, segment: Mapping[str, Any]) -> str | None:
        """The gpufabric instance a segment is on, or None (not gpufabric's)."""
        kind_instance = self.place(segment)
        return None if kind_instance is None else kind_instance[1]

    def place(self, segment: Mapping[str, Any]) -> tuple[str, str] | None:
        if segment.get("network_type") != "vlan" or segment.get("segmentation_id") is None:
            return None
        phys = segment.get("physical_network")
        if not isinstance(phys, str):
            return None
        if phys in self.ib:
            return INFINIBAND, self.ib[phys]
        if phys in self.ethernet:
            return ETHERNET, self.ethernet[phys]
        return None

    def gpufabric_segments(self, segments: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for s in segments:
            instance = self.instance_of(s)
            if instance is not None:
                out.append({"fabric": instance, "seg_id": int(s["segmentation_id"])})
        return out

    def describe(self) -> str:
        def one(m: Mapping[str, str]) -> str:
            return ",".join(f"{p}:{i}" for p, i in sorted(m.items())) or "none"

        return f"ethernet physnets {one(self.ethernet)}; ib physnets {one(self.ib)}"


def _entries(option: str, raw: Iterable[str], default: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in raw:
        phys, sep, instance = (item or "").strip().partition(":")
        phys, instance = phys.strip(), instance.strip() if sep else default
        if not phys:
            raise PhysnetError(
                f"[ml2_gpufabric] {option}: entry {item!r} names no physnet; allowed: PHYSNET or PHYSNET:INSTANCE"
            )
        if not _NAME_RE.match(instance):
            raise PhysnetError(f"[ml2_gpufabric] {option}: instance {instance!r} of physnet {phys} is not a valid gpufabric "
                               "instance name; allowed: 1-63 chars of a-z 0-9 . _ -")  # fmt: skip
        if phys in out:
            raise PhysnetError(f"[ml2_gpufabric] {option}: physnet {phys} is listed twice")
        out[phys] = instance
    return out


def parse(
    ethernet_physnets: Iterable[str] | None, ib_physnets: Iterable[str] | None, ib_physnet: str | None
) -> Physnets:
    """The mapping the options give, or PhysnetError (one line naming the option)."""
    eth = _entries("ethernet_physnets", ethernet_physnets or (), ETHERNET)
    ib_option = "ib_physnets" if ib_physnets else "ib_physnet"
    ib = _entries(ib_option, ib_physnets or ([ib_physnet] if ib_physnet else []), INFINIBAND)
    for phys, instance in eth.items():
        if instance == INFINIBAND:
            raise PhysnetError(f"[ml2_gpufabric] ethernet_physnets: physnet {phys} is mapped to instance {instance}, "
                               "the InfiniBand default instance; allowed: an Ethernet instance")  # fmt: skip
    seen: dict[str, str] = {}
    for phys, instance in ib.items():
        if phys in eth:
            raise PhysnetError(f"[ml2_gpufabric] {ib_option}: physnet {phys} is also in ethernet_physnets; allowed: a "
                               "physnet is either Ethernet or InfiniBand")  # fmt: skip
        if instance == ETHERNET:
            raise PhysnetError(f"[ml2_gpufabric] {ib_option}: physnet {phys} is mapped to instance {instance}, the "
                               "Ethernet default instance; allowed: an InfiniBand instance")  # fmt: skip
        if instance in seen:
            raise PhysnetError(f"[ml2_gpufabric] {ib_option}: physnets {seen[instance]} and {phys} are both mapped to "
                               f"instance {instance}; allowed: one physnet per InfiniBand subnet")  # fmt: skip
        seen[instance] = phys
    return Physnets(eth, ib)
