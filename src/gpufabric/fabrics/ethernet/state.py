"""The Ethernet kind's state values: one switch port's VLAN configuration and a switch's managed
ports. The same types describe *desired* state (from leases) and *observed* state (read back from
the switches), so a plan is the difference of two values of one type and an audit is a check of
one observed value. An Ethernet instance's slice of a :class:`~gpufabric.domain.state.FabricState`
is a ``tuple[SwitchState, ...]``. An aggregate (port-channel, ``ae``, bond) is one name however a
CLI spells it (:func:`aggregate_key`)."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from functools import cached_property

from gpufabric.domain.values import VlanId


class PortMode(enum.StrEnum):
    ACCESS = "access"
    TRUNK = "trunk"
    SHUTDOWN = "shutdown"


@dataclass(frozen=True, order=True)
class EthernetPortConfig:
    """VLAN configuration of one switch port (desired or observed)."""

    switch: str
    port: str
    mode: PortMode
    vlan: VlanId | None = None  # access VLAN, or native VLAN of a trunk
    trunks: tuple[VlanId, ...] = ()  # allowed tagged VLANs (trunk mode)
    # bonds, outside equality (a member's VLANs are its aggregate's): on a member port, the
    # aggregate it is in (observed) / goes back into (a change); on a desired aggregate, its
    # member ports on this switch; the inventory's bond mode (lacp | active-backup)
    bond: str = field(default="", compare=False)
    members: tuple[str, ...] = field(default=(), compare=False)
    bond_mode: str = field(default="", compare=False)
    node: str = field(default="", compare=False, repr=False)  # a desired aggregate's inventory node (refusals name it)

    def vlans(self) -> frozenset[int]:
        """Every VLAN whose traffic this port carries."""
        if self.mode is PortMode.SHUTDOWN:
            return frozenset()
        s = {v.value for v in self.trunks}
        if self.vlan is not None:
            s.add(self.vlan.value)
        return frozenset(s)


@dataclass(frozen=True)
class SwitchState:
    """Every port of one switch that gpufabric manages, keyed by port name."""

    switch: str
    ports: tuple[EthernetPortConfig, ...] = ()

    @cached_property
    def _by_name(self) -> dict[str, EthernetPortConfig]:
        return {p.port: p for p in self.ports}

    def port(self, name: str) -> EthernetPortConfig | None:
        return self._by_name.get(name)


def aggregate_key(name: str) -> str:
    """An aggregate's name as one key however a CLI spells it: ``Port-Channel10``,
    ``port-channel10``, ``Po10``, ``Port-channel 10`` -> ``port-channel10``; others lower-cased."""
    n = re.sub(r"\s+", "", name).lower()
    m = re.fullmatch(r"(?:po|port-channel)(\d+)", n)
    return f"port-channel{m[1]}" if m else n


def same_aggregate(a: str, b: str) -> bool:
    return aggregate_key(a) == aggregate_key(b)
