"""A toy fabric kind with a section of its own in config.yaml's ``segments:`` (the seam
``FabricKind.segment_config``): ``toy: {ids: 4001-4049, tag: 4050}``.

It parses and validates its section itself (unknown keys refused, ``toy.ids`` inside the VLAN id
space), claims its ``ids`` range and its one ``tag`` id (the core checks them against
``user_vlan_range`` and the other kinds'), sets the deployment setting ``toy_tag``, allocates a
network's segment from ``ids`` and tags every port of its desired state with the setting. Nothing
else: no backend worth the name, no inventory.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.fabric import DriverLookup, FabricBackend, FabricKind, FabricPlan, Tenancy
from gpufabric.domain.models import Network, Segment
from gpufabric.domain.segments import SECTION, Claim, IdRange, SegmentSection, allocate, check_vlan_ids, known_keys

NAME = "toy"
KEYS = ("ids", "tag")


@dataclass(frozen=True)
class ToySegments(SegmentSection):
    ids: IdRange
    tag: int
    where: str

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> ToySegments:
        raw = {} if raw is None else raw
        known_keys(f"{SECTION}.{where}", raw, KEYS)
        ids = IdRange.parse(f"{where}.ids", raw.get("ids", "4001-4049"))
        check_vlan_ids(f"{where}.ids", ids)
        tag = raw.get("tag", 4050)
        if not isinstance(tag, int):
            raise ConfigError(f"{where}.tag", tag, "an integer id")
        return cls(ids, tag, where)

    def claims(self) -> Sequence[Claim]:
        return (Claim(f"{self.where}.ids", self.ids), Claim(f"{self.where}.tag", IdRange(self.tag, self.tag), "the toy tag"))

    def settings(self) -> Mapping[str, Any]:
        return {"toy_tag": self.tag}

    def describe(self) -> str:
        return f"toy ids {self.ids}"


@dataclass(frozen=True)
class ToyPlan(FabricPlan):
    def empty(self) -> bool:
        return True

    def lines(self) -> list[str]:
        return []

    def to_dict(self) -> list[Any]:
        return []

    def split(self) -> tuple[ToyPlan, ToyPlan]:
        return self, self


class ToyKind(FabricKind[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]):
    name = NAME

    def segment_config(self, raw: Any, where: str) -> ToySegments:
        return ToySegments.from_dict(raw, where)

    def allocate(self, network: Network, used: Collection[Segment], config: Any) -> Segment | None:
        mine: ToySegments = config.of(ToySegments)
        seg = allocate(range(mine.ids.start, mine.ids.end + 1), {s.seg_id for s in used}, f"{mine.where}.ids")
        return Segment(self.instance, seg)

    def build(self, section: Any, drivers: DriverLookup, settings: Mapping[str, Any]) -> FabricBackend[Any]:
        raise ConfigError(self.name, section, "no backend (a toy)")

    def desired(self, tenancy: Tenancy) -> tuple[tuple[str, int], ...]:
        return tuple((n.name, int(tenancy.settings["toy_tag"])) for n in tenancy.nodes)

    def diff(self, desired: Any, observed: Any) -> ToyPlan:
        return ToyPlan()

    def as_observed(self, desired: Any) -> Any:
        return desired

    def empty_state(self) -> tuple[tuple[str, int], ...]:
        return ()

    def tenants_seen(self, observed: Any, tenancy: Tenancy) -> Mapping[str, frozenset[str]]:
        return {}
