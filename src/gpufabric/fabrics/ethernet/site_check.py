"""``gpufabric site check`` for the Ethernet fabric: each configured switch reachable with its
configured credentials (SSH host key known, OVSDB TLS verified), the tenant VLAN pool allowed
on the trunks toward the spines, every inventory port seen on its switch, and every access
port of a switch that the inventory does not know.

Trunks: a driver declaring ``TRUNKS`` (the OVSDB driver: bridges read with their patch ports,
the lab's and a typical OVS leaf's uplinks) reads them itself; other drivers give the
trunk-mode ports their ``observe`` reads. A switch with no
trunk port readable is reported ``not checked`` with why. An OVS trunk with an empty
``trunks`` column carries every VLAN."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from gpufabric.domain.site_check import CheckLevel, SiteCheck, SiteContext
from gpufabric.fabrics.ethernet.drivers.base import TRUNKS, EthernetSwitchDriver
from gpufabric.fabrics.ethernet.entries import KIND, ethernet_ports
from gpufabric.fabrics.ethernet.segments import EthernetSegments
from gpufabric.fabrics.ethernet.state import PortMode, SwitchState
from gpufabric.transport.parallel import run_parallel

OK, WARN, ERR, CRIT = CheckLevel.OK, CheckLevel.WARNING, CheckLevel.ERROR, CheckLevel.CRITICAL


def _ranges(vlans: Sequence[int]) -> str:
    out: list[str] = []
    for v in sorted(vlans):
        if out and out[-1].split("-")[-1] == str(v - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{v}"
        else:
            out.append(str(v))
    return ",".join(out)


def trunks_of(drv: EthernetSwitchDriver, state: SwitchState) -> dict[str, frozenset[int] | None] | None:
    """Trunk port -> the VLANs it allows (None: every VLAN); None when this driver cannot say."""
    if TRUNKS in drv.capabilities:
        return drv.trunks()
    seen: dict[str, frozenset[int] | None] = {
        p.port: frozenset(v.value for v in p.trunks) for p in state.ports if p.mode is PortMode.TRUNK
    }
    return seen or None


def _one_switch(drv: EthernetSwitchDriver, ctx: SiteContext, instance: str) -> list[SiteCheck]:
    sw = drv.switch
    try:
        state = drv.observe()
    except Exception as e:
        msg = getattr(e, "message", None) or str(e) or type(e).__name__
        hostkey = "host key" in msg
        return [SiteCheck("ETH-HOSTKEY" if hostkey else "ETH-REACH", CRIT if hostkey else ERR,
                          f"fabrics.yaml ethernet switch {sw}: {msg}"
                          + (" (add the switch's key to options.known_hosts)" if hostkey else ""), sw)]  # fmt: skip
    out = [SiteCheck("ETH-REACH", OK, f"switch {sw} answers over {drv.describe()}: {len(state.ports)} port(s)", sw)]
    for n in drv.transport_notes():
        out.append(SiteCheck("ETH-TRANSPORT", WARN, f"fabrics.yaml ethernet switch {sw} options.{n.setting}: {n.message}", sw))
    out += _pool_on_trunks(drv, state, ctx, instance)
    out += _inventory(state, ctx, instance)
    return out


def _pool_on_trunks(drv: EthernetSwitchDriver, state: SwitchState, ctx: SiteContext, instance: str) -> list[SiteCheck]:
    sw = drv.switch
    inv = {f"{p.switch}/{p.switch_port}" for n in ctx.nodes for p in ethernet_ports(n, instance)}
    try:
        trunks = trunks_of(drv, state)
    except Exception as e:
        return [SiteCheck("ETH-TRUNK-VLANS", WARN, f"switch {sw}: not checked (trunks unreadable: {e})", sw)]
    trunks = {n: v for n, v in (trunks or {}).items() if f"{sw}/{n}" not in inv}
    if not trunks:
        why = "the driver reads no trunk port" if TRUNKS in drv.capabilities else f"driver {type(drv).__name__} shows no trunk port"
        return [SiteCheck("ETH-TRUNK-VLANS", WARN, f"switch {sw}: VLAN pool on the uplinks not checked ({why})", sw)]
    pool = ctx.segments.of(EthernetSegments).vlans
    want = set(range(pool.start, pool.end + 1)) - {ctx.settings.get("quarantine_vlan", 0)}
    out = []
    for name, allowed in sorted(trunks.items()):
        missing = sorted(want - allowed) if allowed is not None else []
        subject = f"{sw}/{name}"
        if missing:
            out.append(SiteCheck("ETH-TRUNK-VLANS", ERR,
                                 f"config.yaml segments.ethernet.vlan_range {pool}: VLAN(s) {_ranges(missing)} not allowed "
                                 f"on trunk {name} of switch {sw}", subject))  # fmt: skip
        else:
            out.append(SiteCheck("ETH-TRUNK-VLANS", OK, f"trunk {name} of switch {sw} allows the VLAN pool {pool}", subject))
    return out


def _inventory(state: SwitchState, ctx: SiteContext, instance: str) -> list[SiteCheck]:
    sw = state.switch
    seen = {p.port for p in state.ports}
    want = [p for n in ctx.nodes for p in ethernet_ports(n, instance) if p.switch == sw]
    out = []
    missing = [p for p in want if p.switch_port not in seen]
    for m in missing:
        out.append(SiteCheck("ETH-INVENTORY-PORT", ERR, f"inventory port {m.switch_port} ({m.node} {m.name}) is not on "
                             f"switch {sw}", f"{sw}/{m.switch_port}"))  # fmt: skip
    if want and not missing:
        out.append(SiteCheck("ETH-INVENTORY-PORT", OK, f"all {len(want)} inventory port(s) on switch {sw} seen", sw))
    known = {p.switch_port for p in want}
    unknown = [p.port for p in state.ports if p.mode is PortMode.ACCESS and p.port not in known]
    if unknown:  # one finding per switch: a site's unused ports would drown everything else
        shown = ", ".join(unknown[:8]) + (f", ... ({len(unknown) - 8} more)" if len(unknown) > 8 else "")
        out.append(SiteCheck("ETH-UNKNOWN-PORT", WARN, f"{len(unknown)} access port(s) of switch {sw} not in the "
                             f"inventory: {shown}", f"{sw}/{unknown[0]}"))  # fmt: skip
    return out


def ethernet_site_checks(switches: Mapping[str, EthernetSwitchDriver], ctx: SiteContext, instance: str = KIND) -> list[SiteCheck]:
    """Every switch checked in parallel (one thread each); then inventory switches not configured."""
    out: list[SiteCheck] = []
    def job(d: EthernetSwitchDriver) -> Callable[[], list[SiteCheck]]:
        return lambda: _one_switch(d, ctx, instance)

    for checks in run_parallel({n: job(d) for n, d in switches.items()}).values():
        out += checks
    for p in (p for n in ctx.nodes for p in ethernet_ports(n, instance)):
        if p.switch not in switches:
            out.append(SiteCheck("ETH-INVENTORY-PORT", ERR, f"inventory port {p.switch_port} ({p.node} {p.name}): "
                                 f"switch {p.switch} is not in fabrics.yaml ethernet", f"{p.switch}/{p.switch_port}"))  # fmt: skip
    return out
