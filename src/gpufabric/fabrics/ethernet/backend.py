"""The Ethernet backend: every switch of an instance's ``fabrics.yaml`` ``ethernet:`` list built
from its driver entry (one OVSDB connection per database server, shared by its bridges),
observed and applied in parallel (one transaction/session per switch, one thread each), and
the verified read-back of the ports it set."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias, cast

from gpufabric.domain.errors import ConfigError, VerifyError
from gpufabric.domain.fabric import DriverLookup, FabricBackend, FabricPlan, build_driver
from gpufabric.domain.site_check import SiteCheck, SiteContext
from gpufabric.fabrics.ethernet.drivers.base import EthernetSwitchDriver
from gpufabric.fabrics.ethernet.drivers.ovsdb.pool import OvsdbPool
from gpufabric.fabrics.ethernet.entries import KIND
from gpufabric.fabrics.ethernet.plan import EthernetPlan, EthState
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, SwitchState, same_aggregate
from gpufabric.transport.parallel import run_parallel
from gpufabric.transport.secrets import TransportNote

SiteChecks: TypeAlias = Callable[[Mapping[str, EthernetSwitchDriver], SiteContext, str], Sequence[SiteCheck]]


def build_switches(
    section: Sequence[Any], drivers: DriverLookup, quarantine_vlan: int
) -> tuple[dict[str, EthernetSwitchDriver], OvsdbPool]:
    """switch -> its driver, of every ``{driver, options}`` entry (each switch once), and the
    OVSDB connections they share."""
    switches: dict[str, EthernetSwitchDriver] = {}
    pool = OvsdbPool()  # one OVSDB connection per database server, shared by its bridges
    for i, entry in enumerate(section):
        drv = cast(EthernetSwitchDriver, build_driver(
            drivers, f"ethernet[{i}]", entry, {}, {"quarantine_vlan": quarantine_vlan, "pool": pool},
            expect=(EthernetSwitchDriver, "an Ethernet switch driver"),
        ))  # fmt: skip
        if drv.switch in switches:
            raise ConfigError(f"ethernet[{i}].options.switch", drv.switch, "each switch once")
        switches[drv.switch] = drv
    return switches, pool


class EthernetBackend(FabricBackend[EthState]):
    """Every configured switch; observed and applied in parallel, one thread per switch."""

    capabilities = frozenset({"observe", "apply"})

    def __init__(
        self, switches: Mapping[str, EthernetSwitchDriver], verify_timeout: float = 10.0, pool: OvsdbPool | None = None,
        instance: str = KIND, site_checks: SiteChecks | None = None,
    ) -> None:
        self.switches = dict(switches)
        self._site_checks = site_checks  # the kind's checks of these switches (site_check sits above the backend)
        self.instance = instance  # the fabric instance it drives (whose inventory ports its site check reads)
        self.verify_timeout = verify_timeout
        self.pool = pool  # the OVSDB connections the switches share (closed with the backend)

    def observe(self) -> EthState:
        return tuple(s for s in run_parallel({n: d.observe for n, d in self.switches.items()}).values())

    def apply(self, plan: FabricPlan) -> EthState:
        assert isinstance(plan, EthernetPlan)
        work = plan.by_switch()
        for name in work:
            if name not in self.switches:
                raise ConfigError("switch", name, f"a switch in fabrics.yaml ({', '.join(sorted(self.switches))})")
        jobs = {n: (lambda d=self.switches[n], ps=ps: self._apply_one(d, ps)) for n, ps in work.items()}
        return tuple(run_parallel(jobs).values())

    def _apply_one(self, drv: EthernetSwitchDriver, ports: Sequence[EthernetPortConfig]) -> SwitchState:
        """Apply, then read the switch back until it holds ``ports`` (the verified read-back; a
        member put back in its aggregate must also be read in it)."""
        drv.apply(ports)
        deadline = time.monotonic() + self.verify_timeout
        want = {p.port: p for p in ports}
        while True:
            seen = drv.observe()
            got = tuple(p for p in seen.ports if p.port in want)
            if {p.port: p for p in got} == want and all(_joined(seen, w) for w in want.values()):
                return SwitchState(drv.switch, tuple(sorted(got)))
            if time.monotonic() > deadline:
                bad = [str(w) for k, w in want.items() if seen.port(k) != w or not _joined(seen, w)]
                raise VerifyError(
                    f"{drv.switch}: {len(bad)} port(s) not as applied after {self.verify_timeout}s",
                    fabric="ethernet",
                    device=drv.switch,
                    mismatches=bad[:20],
                )
            time.sleep(0.05)

    def site_checks(self, context: SiteContext) -> Sequence[SiteCheck]:
        return self._site_checks(self.switches, context, self.instance) if self._site_checks is not None else ()

    def transport_notes(self) -> tuple[TransportNote, ...]:
        """What every switch driver reports about its own transport (audit ``TRANSPORT-INSECURE``)."""
        return tuple(n for d in self.switches.values() for n in d.transport_notes())

    def close(self) -> None:
        for d in self.switches.values():
            d.close()
        if self.pool is not None:
            self.pool.close()


def _joined(seen: SwitchState, want: EthernetPortConfig) -> bool:
    """A member put back (``want.bond``) is read in that aggregate: equality leaves ``bond`` out."""
    got = seen.port(want.port)
    return not want.bond or (got is not None and same_aggregate(got.bond, want.bond))
