"""Reaching the subnet's SMs: which one is master (by SMInfo), and waiting for its SUBNET UP.

:func:`choose_master` (pure) picks the SM host to act on from the SMInfo each SM host's port
answers: the one in MASTER state; with none (a rogue SM took the subnet, or the master was cut
off), the one OpenSM's election would make master (highest priority, then lowest GUID). Never
the configuration order: after a failover the second host listed is the master.
:func:`sm_states` reads those SMInfos (``sminfo LID`` of each SM host's port, as discovered).

:func:`wait_subnet_up` follows an SM host's log from an offset until the next ``SUBNET UP``
(after a reload or a restart), naming the host when it does not come.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from gpufabric.domain.errors import ApplyError, GpufabricError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.drivers.opensm.diag import Diag
from gpufabric.fabrics.infiniband.drivers.opensm.hosts import LocalSmHost, SmHost
from gpufabric.fabrics.infiniband.readers.diags import OpenSMLogScan, parse_opensm_log
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import CaPort
from gpufabric.fabrics.infiniband.state import SmSeen, SmState

FABRIC = "infiniband"
SWEEP_POLL_S = 0.004
SSH_POLL_S = 0.02  # the same poll over SSH (one exec per poll)
"""How often the log is read for SUBNET UP after a reload: a sweep of a small fabric takes
5-30 ms, so a coarser poll (20 ms before) added up to its own length to every apply."""


def choose_master(hosts: Sequence[SmHost], seen: Mapping[Guid, SmSeen]) -> SmHost | None:
    """The SM host whose port's SMInfo says MASTER; else the one the election would pick
    (highest priority, then lowest GUID) among those that answered; None when none answered."""
    answered = [(seen[h.port_guid], h) for h in hosts if h.port_guid is not None and h.port_guid in seen]
    if not answered:
        return None
    masters = [x for x in answered if x[0].state is SmState.MASTER]
    pool = masters or answered
    return min(pool, key=lambda x: (-x[0].priority, x[1].port_guid.value if x[1].port_guid else 0))[1]


def sm_states(diag: Diag, hosts: Sequence[SmHost], ports: Mapping[Guid, CaPort]) -> dict[Guid, SmSeen]:
    """SMInfo of each SM host's port (by its discovered LID); hosts that do not answer are left out."""
    out: dict[Guid, SmSeen] = {}
    for h in hosts:
        p = ports.get(h.port_guid) if h.port_guid is not None else None
        if p is None:
            continue
        try:
            out[p.guid] = diag.sminfo(p.lid)
        except GpufabricError:
            continue
    return out


def wait_subnet_up(host: SmHost, offset: int, timeout: float, idle: Callable[[], None]) -> OpenSMLogScan:
    """Follow ``host``'s log from ``offset`` until SUBNET UP; ``idle`` runs between polls."""
    deadline = time.monotonic() + timeout
    local = isinstance(host, LocalSmHost)
    poll = SWEEP_POLL_S if local else SSH_POLL_S
    scan, read_at = OpenSMLogScan(), -1  # a local log is read again only once it has grown (a stat per poll)
    while True:
        size = host.size(host.log_file) if local else -1
        if size < 0 or size != read_at:
            scan, read_at = parse_opensm_log(host.read_from(host.log_file, offset)), size
        if scan.subnet_up:  # after a PARSE ERROR OpenSM still sweeps (failing open)
            return scan
        if time.monotonic() > deadline:
            where = "" if local else f"SM host {host.name}: "
            raise ApplyError(
                f"{where}no SUBNET UP in {host.log_file} within {timeout}s after reload",
                fabric=FABRIC,
                device=host.name if where else str(host.log_file),
                sm_host=host.name,
                problems=list(scan.problems()[:20]),
            )
        idle()
        time.sleep(poll)


@dataclass
class ApplyReport:
    """Timings and counts of the last apply (for benchmarks and logs)."""

    changed: bool = False
    ports_checked: int = 0
    reloads: int = 0
    sweep_seconds: float = 0.0  # reload -> SUBNET UP
    verify_seconds: float = 0.0  # SUBNET UP -> every affected table verified
    total_seconds: float = 0.0
    log: OpenSMLogScan = field(default_factory=OpenSMLogScan)
