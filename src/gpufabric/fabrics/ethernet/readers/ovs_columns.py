"""Pure mapping between :class:`EthernetPortConfig` and the OVS ``Port`` columns.

Owns the VLAN policy every OVS-backed Ethernet driver enforces (the OVSDB driver, and the
SSH driver's ``ovs`` dialect that writes the same columns with ``ovs-vsctl``; shared by both,
it sits below the driver folders):

* ACCESS  -> ``vlan_mode=access, tag=V, trunks=[]``
* TRUNK   -> ``vlan_mode=trunk, trunks=[...]`` (no native VLAN), or
  ``vlan_mode=native-untagged, tag=N, trunks=[...]`` (native VLAN ``N``)
* SHUTDOWN -> ``vlan_mode=access, tag=<quarantine VLAN>, trunks=[], protected=true``.
  OVS has no writable admin-down in OVSDB (``Interface.admin_state`` is a read-only
  status column and internal ports of the userspace datapath report ``down`` while
  passing traffic), so a shut port is put alone in the quarantine VLAN and marked
  ``protected``: OVS drops every frame between two protected ports, an access port drops
  tagged frames, and the quarantine VLAN is never carried by a trunk (refused below), so
  a shut port reaches nobody. Verified by ping in tests/fabrics/ethernet/functional/test_ethernet_dataplane.py.

Never a port without a VLAN: an access port without a VLAN, a trunk without allowed
VLANs (in OVS an empty ``trunks`` means *every* VLAN) and VLAN 1 anywhere are refused
with :class:`ValidationError` before anything is written.

Reading back, a port is SHUTDOWN only when it is an access port of the quarantine VLAN
*and* protected; an unconfigured port (no ``vlan_mode``, no ``tag``, no ``trunks``)
really carries every VLAN in OVS, and is reported as a TRUNK of all VLANs 1-4094 so
that an audit sees the leak.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode

FORBIDDEN_VLAN: Final = 1
ALL_VLANS: Final = tuple(VlanId(v) for v in range(VlanId.MIN, VlanId.MAX + 1))
TENANT_VLAN_ALLOWED: Final = "2-4094, not the quarantine VLAN"


@dataclass(frozen=True)
class PortColumns:
    """The ``Port`` columns gpufabric writes (and reads) for one port."""

    vlan_mode: str
    tag: int | None
    trunks: tuple[int, ...]
    protected: bool


def check_quarantine_vlan(raw: VlanId | int | str) -> VlanId:
    q = raw if isinstance(raw, VlanId) else VlanId.parse(raw, "quarantine_vlan")
    if q.value == FORBIDDEN_VLAN:
        raise ValidationError("quarantine_vlan", q.value, "2-4094", "VLAN 1 is the default VLAN")
    return q


def _check_tenant_vlan(field: str, v: VlanId, quarantine: VlanId) -> None:
    if v.value == FORBIDDEN_VLAN:
        raise ValidationError(field, v.value, TENANT_VLAN_ALLOWED, "VLAN 1 is the default VLAN")
    if v == quarantine:
        raise ValidationError(field, v.value, TENANT_VLAN_ALLOWED, "the quarantine VLAN")


def check_port_config(cfg: EthernetPortConfig, quarantine: VlanId) -> None:
    """Refuse any configuration that would leave a port untagged, on VLAN 1, or leaking."""
    where = f"{cfg.switch}/{cfg.port}"
    if cfg.mode is PortMode.SHUTDOWN:
        if cfg.vlan is not None or cfg.trunks:
            raise ValidationError(f"{where}.vlan", cfg.vlan, "none for a shut port", "a shut port carries no VLAN")
        return
    if cfg.mode is PortMode.ACCESS:
        if cfg.vlan is None:
            raise ValidationError(f"{where}.vlan", None, TENANT_VLAN_ALLOWED, "an access port needs a VLAN")
        if cfg.trunks:
            raise ValidationError(f"{where}.trunks", [t.value for t in cfg.trunks], "empty for an access port")
        _check_tenant_vlan(f"{where}.vlan", cfg.vlan, quarantine)
        return
    if not cfg.trunks:
        raise ValidationError(
            f"{where}.trunks", [], "at least one VLAN", "an empty trunk list carries every VLAN on OVS"
        )
    for t in cfg.trunks:
        _check_tenant_vlan(f"{where}.trunks", t, quarantine)
    if cfg.vlan is not None:
        _check_tenant_vlan(f"{where}.vlan", cfg.vlan, quarantine)


def columns_for(cfg: EthernetPortConfig, quarantine: VlanId) -> PortColumns:
    """The columns that realise ``cfg`` (validated first)."""
    check_port_config(cfg, quarantine)
    if cfg.mode is PortMode.SHUTDOWN:
        return PortColumns("access", quarantine.value, (), True)
    if cfg.mode is PortMode.ACCESS:
        assert cfg.vlan is not None
        return PortColumns("access", cfg.vlan.value, (), False)
    trunks = tuple(sorted({t.value for t in cfg.trunks}))
    if cfg.vlan is None:
        return PortColumns("trunk", None, trunks, False)
    return PortColumns("native-untagged", cfg.vlan.value, trunks, False)


def _vlans(values: Iterable[int]) -> tuple[VlanId, ...]:
    # VLAN 0 (untagged/priority) and out-of-range values are not VLANs a tenant can hold.
    return tuple(VlanId(v) for v in sorted(set(values)) if VlanId.MIN <= v <= VlanId.MAX)


def config_from_columns(switch: str, port: str, cols: PortColumns, quarantine: VlanId) -> EthernetPortConfig:
    """What a port with these columns really does, as an :class:`EthernetPortConfig`."""
    mode = cols.vlan_mode or ("access" if cols.tag is not None else "trunk")
    tag = VlanId(cols.tag) if cols.tag is not None and VlanId.MIN <= cols.tag <= VlanId.MAX else None
    if mode in ("access", "dot1q-tunnel"):
        if cols.protected and tag == quarantine:
            return EthernetPortConfig(switch, port, PortMode.SHUTDOWN)
        return EthernetPortConfig(switch, port, PortMode.ACCESS, vlan=tag)
    trunks = _vlans(cols.trunks) if cols.trunks else ALL_VLANS
    native = tag if mode in ("native-untagged", "native-tagged") else None
    return EthernetPortConfig(switch, port, PortMode.TRUNK, vlan=native, trunks=trunks)


def normalized(cfg: EthernetPortConfig) -> EthernetPortConfig:
    """``cfg`` as it reads back: trunk VLANs sorted and de-duplicated."""
    return EthernetPortConfig(cfg.switch, cfg.port, cfg.mode, cfg.vlan, tuple(sorted(set(cfg.trunks))))
