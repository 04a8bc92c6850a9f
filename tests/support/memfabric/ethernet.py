"""An in-memory Ethernet switch driver: ports in a dict, same policy as the real drivers.

``apply`` validates the whole batch first (the VLAN policy shared with the OVSDB and SSH
drivers: never VLAN 1, never untagged, never the quarantine VLAN as a tenant VLAN; every
change for this switch; every port known) and then sets every port at once, so a refused
batch changes nothing. Ports start SHUTDOWN (parked in quarantine). ``faults`` injects
errors; ``set_port`` changes a port behind the control plane's back (drift).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from gpufabric.domain.errors import ApplyError, ValidationError
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.drivers.base import EthernetSwitchDriver
from gpufabric.fabrics.ethernet.drivers.ssh.dialects import validate_change
from gpufabric.fabrics.ethernet.readers.ovs_columns import check_quarantine_vlan
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState

from support.memfabric.faults import Faults


class MemorySwitchDriver(EthernetSwitchDriver):
    """``MemorySwitchDriver(switch="leaf-1", ports=["p1", ...] or 24, quarantine_vlan=4000)``."""

    def __init__(self, switch: str, ports: Iterable[str] | int = 24, quarantine_vlan: int | VlanId = 4000) -> None:
        names = [f"p{i}" for i in range(1, ports + 1)] if isinstance(ports, int) else list(ports)
        self._switch = switch
        self.quarantine = check_quarantine_vlan(quarantine_vlan)
        self._lock = threading.Lock()
        self._ports = {p: EthernetPortConfig(switch, p, PortMode.SHUTDOWN) for p in names}
        self.faults = Faults()
        self.applies = 0

    @property
    def switch(self) -> str:
        return self._switch

    def observe(self) -> SwitchState:
        with self._lock:
            return SwitchState(self._switch, tuple(sorted(self._ports.values())))

    def apply(self, changes: Sequence[EthernetPortConfig]) -> None:
        changes = list(changes)
        for c in changes:
            if c.switch != self._switch:
                raise ValidationError("switch", c.switch, self._switch, f"change for port {c.port} sent to the wrong driver")
            validate_change(c, self.quarantine)
        if not changes:
            return
        self.faults.check(changes)
        with self._lock:
            unknown = [c.port for c in changes if c.port not in self._ports]
            if unknown:
                raise ApplyError(
                    f"{self._switch}: no such port(s): {', '.join(unknown)}",
                    fabric="ethernet",
                    device=self._switch,
                    ports=unknown,
                )
            for c in changes:
                self._ports[c.port] = _canonical(c)
            self.applies += 1

    def set_port(self, cfg: EthernetPortConfig) -> None:
        """Change a port out of band (drift injected by a test)."""
        with self._lock:
            self._ports[cfg.port] = _canonical(cfg)


def _canonical(c: EthernetPortConfig) -> EthernetPortConfig:
    """What a switch reads back: trunks sorted and without the native VLAN."""
    if c.mode is PortMode.SHUTDOWN:
        return EthernetPortConfig(c.switch, c.port, PortMode.SHUTDOWN)
    trunks = tuple(sorted({t for t in c.trunks if t != c.vlan}, key=lambda v: v.value))
    return EthernetPortConfig(c.switch, c.port, c.mode, c.vlan, trunks)
