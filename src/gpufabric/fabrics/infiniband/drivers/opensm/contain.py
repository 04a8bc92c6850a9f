"""Rogue-SM containment through the OpenSM driver (policy ``contain``): rediscover, cut each
finding's switch port (never a trusted SM's), write the intended layout, restart the trusted
OpenSM and verify every remaining port by SMP. Detection is pure (:mod:`...audit.rogue`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

from gpufabric.domain.errors import FabricError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.audit.places import Places
from gpufabric.fabrics.infiniband.audit.rogue import (
    RogueFinding,
    RoguePolicy,
    RogueReport,
    containment_targets,
    find_rogue_sms,
)
from gpufabric.fabrics.infiniband.drivers.opensm.config import OpenSMConfig
from gpufabric.fabrics.infiniband.drivers.opensm.diag import Diag
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import CaPort
from gpufabric.fabrics.infiniband.state import IbFabricState, PartitionLayout
from gpufabric.fabrics.infiniband.state.partitions import check_layout


class ContainingSm(Protocol):
    """What containment needs of the OpenSM driver (:class:`~.driver.OpenSMDriver`)."""

    config: OpenSMConfig
    diag: Diag

    def ports(self, refresh: bool = False) -> dict[Guid, CaPort]: ...
    def observe(self) -> IbFabricState: ...
    def write_partitions(self, layout: PartitionLayout) -> None: ...
    def restart(self) -> None: ...
    def verify(self, layout: PartitionLayout, ports: Sequence[CaPort]) -> None: ...


def check_rogue_sms(driver: ContainingSm, places: Places | None = None) -> tuple[tuple[RogueFinding, ...], float]:
    """Observe the fabric and return (findings, seconds it took); ``places``: where the
    inventory puts the ports (no node is named without it: a description is not a name)."""
    t0 = time.monotonic()
    state = driver.observe()
    return find_rogue_sms(state, driver.config.trusted_sm_guids, places), time.monotonic() - t0


def contain_rogue_sms(
    driver: ContainingSm, layout: PartitionLayout, policy: RoguePolicy = RoguePolicy.CONTAIN,
    places: Places | None = None,
) -> RogueReport:  # fmt: skip
    """Detect; with ``contain``: cut every rogue off, restart the trusted SM, verify ``layout``.
    Detection and the cut both run on a topology rediscovered now: a rogue that took over may
    have reassigned LIDs, and a cached LID -> port map would point at the wrong ports."""
    if policy is RoguePolicy.CONTAIN:
        driver.ports(refresh=True)
    findings, detect = check_rogue_sms(driver, places)
    if not findings or policy is RoguePolicy.ALERT:
        return RogueReport(findings, policy, detect_seconds=detect)
    t0 = time.monotonic()
    targets, alerts = containment_targets(findings, driver.ports(), driver.config.trusted_sm_guids)
    contained = []
    for p in targets:
        assert p.switch_lid is not None and p.switch_port is not None
        try:
            driver.diag.port_disable(p.switch_lid, p.switch_port)
        except FabricError as e:  # one refused cut (e.g. a wrong M_Key) does not spare the others
            alerts += [(f, f"ibportstate disable failed: {e.message}") for f in findings if f.lid == p.lid]
            continue
        contained.append(p.guid)
    if not contained:  # only alerts: nothing was cut, the trusted SM is left as it runs
        return RogueReport(findings, policy, (), detect, time.monotonic() - t0, 0, tuple(alerts))
    # The trusted SM comes back with the intended layout, whatever was in the file before
    # (seen on OpenSM 3.3.23: after a rogue's sweep, a later HUP did not drop a stale key).
    driver.write_partitions(layout)
    driver.restart()
    norm = check_layout(layout, driver.config.trusted_sm_guids)
    live = driver.ports(refresh=True)
    check = [live[g] for g in sorted(set(live) - set(contained))]
    driver.verify(norm, check)
    return RogueReport(findings, policy, tuple(contained), detect, time.monotonic() - t0, len(check), tuple(alerts))
