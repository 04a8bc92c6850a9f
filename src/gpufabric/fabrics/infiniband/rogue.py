"""Rogue subnet managers: detect (pure) and contain (through the OpenSM driver).

Detection (:func:`find_rogue_sms`) is a pure function over an observed
:class:`IbFabricState`: any SM whose port GUID is not trusted, and a master that is not
trusted, is a finding naming its GUID, LID and node. Measured on ibsim + OpenSM 3.3.23: a
rogue opensm of higher priority (or equal priority and lower GUID) becomes MASTER and
rewrites every PKey table in ~0.5 s; with a different sm_key both stay MASTER and the
trusted one does not repair anything until it is restarted; ibsim has no M_Key, so
nothing stops the rewrite itself.

Containment (:func:`contain_rogue_sms`, policy ``contain``): disable the switch port the
rogue HCA is cabled to (``ibportstate <switch lid> <port> disable``, run as the trusted SM
node), write the intended layout and restart the trusted OpenSM, then verify by
SMP reads that every remaining port holds exactly the PKeys of the intended layout.
Policy ``alert`` only reports. Times to detect and to restore are measured.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpufabric.domain.errors import FabricError
from gpufabric.domain.state import IbFabricState, PartitionLayout, SmState
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.opensm import OpenSMDriver
from gpufabric.fabrics.infiniband.partitions import check_layout


class RoguePolicy(enum.StrEnum):
    ALERT = "alert"
    CONTAIN = "contain"


@dataclass(frozen=True, order=True)
class RogueFinding:
    guid: Guid
    lid: int
    node: str
    state: SmState
    priority: int
    reason: str

    def __str__(self) -> str:
        where = f" on {self.node}" if self.node else ""
        return f"{self.reason}: SM {self.guid} (lid {self.lid}{where}, {self.state.value}, priority {self.priority})"


def find_rogue_sms(
    state: IbFabricState, trusted: Iterable[Guid], nodes: Mapping[Guid, str] | None = None
) -> tuple[RogueFinding, ...]:
    """Every SM seen whose GUID is not ``trusted``; the master too if untrusted. ``nodes``
    (port GUID -> node name) fills in the node where the observation did not."""
    ok = frozenset(trusted)
    names = nodes or {}
    out: dict[Guid, RogueFinding] = {}
    for s in state.sms:
        if s.guid in ok:
            continue
        reason = "untrusted master SM" if s.state is SmState.MASTER or s.guid == state.master_guid else "untrusted SM"
        out[s.guid] = RogueFinding(s.guid, s.lid, s.node or names.get(s.guid, ""), s.state, s.priority, reason)
    m = state.master_guid
    if m is not None and m not in ok and m not in out:
        out[m] = RogueFinding(m, 0, names.get(m, ""), SmState.MASTER, -1, "untrusted master SM")
    return tuple(sorted(out.values()))


@dataclass(frozen=True)
class RogueReport:
    findings: tuple[RogueFinding, ...]
    policy: RoguePolicy
    contained: tuple[Guid, ...] = ()  # HCAs whose switch port was disabled
    detect_seconds: float = 0.0
    restore_seconds: float = 0.0  # containment start -> every table verified
    verified_ports: int = 0


def check_rogue_sms(driver: OpenSMDriver) -> tuple[tuple[RogueFinding, ...], float]:
    """Observe the fabric and return (findings, seconds it took)."""
    t0 = time.monotonic()
    state = driver.observe()
    nodes = {g: p.host for g, p in driver.ports().items()}
    return find_rogue_sms(state, driver.config.trusted_sm_guids, nodes), time.monotonic() - t0


def contain_rogue_sms(
    driver: OpenSMDriver, layout: PartitionLayout, policy: RoguePolicy = RoguePolicy.CONTAIN
) -> RogueReport:
    """Detect; with ``contain``: cut every rogue off, restart the trusted SM, verify ``layout``."""
    findings, detect = check_rogue_sms(driver)
    if not findings or policy is RoguePolicy.ALERT:
        return RogueReport(findings, policy, detect_seconds=detect)
    t0 = time.monotonic()
    ports = driver.ports()
    contained = []
    for f in findings:
        p = ports.get(f.guid)
        if p is None or p.switch_lid is None or p.switch_port is None:
            raise FabricError(
                f"cannot contain {f}: its switch port is unknown", fabric="infiniband", device=str(f.guid)
            )
        driver.diag.port_disable(p.switch_lid, p.switch_port)
        contained.append(f.guid)
    # The trusted SM comes back with the intended layout, whatever was in the file before
    # (seen on OpenSM 3.3.23: after a rogue's sweep, a later HUP did not drop a stale key).
    driver.write_partitions(layout)
    driver.restart()
    norm = check_layout(layout, driver.config.trusted_sm_guids)
    live = driver.ports(refresh=True)
    check = [live[g] for g in sorted(set(live) - set(contained))]
    driver.verify(norm, check)
    return RogueReport(findings, policy, tuple(contained), detect, time.monotonic() - t0, len(check))
