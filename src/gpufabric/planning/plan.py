"""``plan(desired, observed) -> Plan``: the immutable, printable difference per fabric and device.

Ethernet changes are grouped per switch (one transaction each when applied). InfiniBand
changes are listed per PKey and GUID (remove or add) for people; the driver is handed
the whole desired partition layout, since a subnet manager takes one file per sweep.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable
from dataclasses import dataclass

from gpufabric.domain.state import EthernetPortConfig, FabricState, IbFabricState, PartitionLayout, PkeyTable
from gpufabric.domain.values import Guid
from gpufabric.planning.desired import DesiredState

DEFAULT_PKEY = 0x7FFF


@dataclass(frozen=True)
class EthernetChange:
    before: EthernetPortConfig | None
    after: EthernetPortConfig

    @property
    def switch(self) -> str:
        return self.after.switch

    def __str__(self) -> str:
        return f"ethernet {self.after.switch}/{self.after.port}: {_eth(self.before)} -> {_eth(self.after)}"


def _eth(c: EthernetPortConfig | None) -> str:
    if c is None:
        return "absent"
    if c.mode.value == "trunk":
        return f"trunk[{','.join(str(v) for v in c.trunks)}]" + (f" native {c.vlan}" if c.vlan else "")
    return f"{c.mode.value} {c.vlan}" if c.vlan else c.mode.value


class PkeyAction(enum.StrEnum):
    REMOVE = "remove"
    ADD = "add"


@dataclass(frozen=True, order=True)
class PkeyChange:
    action: PkeyAction
    pkey: int  # 15-bit partition number
    guid: Guid

    def __str__(self) -> str:
        return f"infiniband pkey 0x{self.pkey:04x}: {self.action.value} full member {self.guid}"


@dataclass(frozen=True)
class Plan:
    ethernet: tuple[EthernetChange, ...] = ()
    ib: tuple[PkeyChange, ...] = ()
    ib_layout: PartitionLayout | None = None  # the layout to push when ``ib`` is not empty

    @property
    def empty(self) -> bool:
        return not self.ethernet and not self.ib

    def switches(self) -> dict[str, tuple[EthernetPortConfig, ...]]:
        out: dict[str, list[EthernetPortConfig]] = {}
        for c in self.ethernet:
            out.setdefault(c.switch, []).append(c.after)
        return {k: tuple(v) for k, v in sorted(out.items())}

    def lines(self) -> list[str]:
        return [str(c) for c in self.ethernet] + [str(c) for c in self.ib]

    def __str__(self) -> str:
        return "\n".join(self.lines()) or "no changes"

    def to_dict(self) -> dict[str, object]:
        return {
            "ethernet": [
                {"switch": c.after.switch, "port": c.after.port, "before": _eth(c.before), "after": _eth(c.after)}
                for c in self.ethernet
            ],
            "infiniband": [{"action": c.action.value, "pkey": f"0x{c.pkey:04x}", "guid": str(c.guid)} for c in self.ib],
        }


def plan_ethernet(desired: DesiredState, observed: FabricState) -> tuple[EthernetChange, ...]:
    changes = []
    for want_sw in desired.switches:
        seen = next((s for s in observed.switches if s.switch == want_sw.switch), None)
        for want in want_sw.ports:
            have = seen.port(want.port) if seen else None
            if have != want:
                changes.append(EthernetChange(have, want))
    return tuple(changes)


def desired_full_keys(layout: PartitionLayout) -> dict[Guid, set[int]]:
    keys: dict[Guid, set[int]] = {}
    for part in layout.partitions:
        for g in part.full_members():
            keys.setdefault(g, set()).add(part.pkey.value)
    return keys


def plan_ib(layout: PartitionLayout, observed: IbFabricState, guids: Iterable[Guid]) -> tuple[PkeyChange, ...]:
    """Per port GUID of the inventory: tenant keys to remove (first) and to add."""
    want = desired_full_keys(layout)
    changes: list[PkeyChange] = []
    for g in sorted(set(guids)):
        table = observed.table(g)
        have = (table.full_keys() | table.limited_keys()) - {DEFAULT_PKEY} if table else set()
        target = want.get(g, set())
        changes += [PkeyChange(PkeyAction.REMOVE, k, g) for k in sorted(have - target)]
        full = table.full_keys() if table else set()
        changes += [PkeyChange(PkeyAction.ADD, k, g) for k in sorted(target - full)]
    return tuple(sorted(changes, key=lambda c: (c.action is PkeyAction.ADD, c.pkey, c.guid)))


def reachable_layout(layout: PartitionLayout, observed: IbFabricState) -> PartitionLayout:
    """``layout`` without members the fabric does not show (link down, port disabled after a
    rogue SM was contained): a subnet manager cannot program them, and they rejoin as soon
    as they are seen again. An unobserved subnet (no tables at all) leaves it unchanged."""
    if not observed.tables:
        return layout
    seen = {t.port_guid for t in observed.tables}
    parts = tuple(
        dataclasses.replace(p, members=tuple(m for m in p.members if m.guid in seen)) for p in layout.partitions
    )
    return dataclasses.replace(layout, partitions=tuple(p for p in parts if p.members))


def plan(desired: DesiredState, observed: FabricState, ib_guids: Iterable[Guid] = ()) -> Plan:
    """The changes that turn ``observed`` into ``desired`` (pure)."""
    eth = plan_ethernet(desired, observed)
    layout = reachable_layout(desired.ib, observed.ib)
    seen = {t.port_guid for t in observed.ib.tables}
    guids = [g for g in ib_guids if g in seen] if observed.ib.tables else list(ib_guids)
    ib = plan_ib(layout, observed.ib, guids)
    return Plan(eth, ib, layout if ib else None)


def as_observed(desired: DesiredState, guids: Iterable[Guid]) -> FabricState:
    """The fabric state that ``desired`` would read back as (for previews of later phases)."""
    want = desired_full_keys(desired.ib)
    tables = tuple(
        PkeyTable(g, (DEFAULT_PKEY, *sorted(k | 0x8000 for k in want.get(g, set())))) for g in sorted(set(guids))
    )
    return FabricState(switches=desired.switches, ib=IbFabricState(tables=tables))
