"""``IB-SM-CONFIG-DIVERGED``: a standby SM whose partitions file is not what gpufabric wrote.

A standby that takes over programs every PKey table from its own partitions file: one that
differs from what gpufabric last wrote and verified (edited by hand, left behind by a failed
write, never written) would silently revert every tenant's isolation at the next failover -
critical. A standby whose file cannot be read (or is missing) is high: the takeover cannot be
vouched for. The master's own file is not judged here (the apply and the table diff cover it).
Pure: reads the ``sm_files`` the OpenSM driver's observe filled in.
"""

from __future__ import annotations

from gpufabric.domain.fabric import InvariantSpec
from gpufabric.domain.findings import Violation
from gpufabric.domain.severity import Severity
from gpufabric.fabrics.infiniband.entries import KIND
from gpufabric.fabrics.infiniband.state import IbFabricState

INVARIANT = "IB-SM-CONFIG-DIVERGED"
SPEC = InvariantSpec(
    INVARIANT,
    Severity.CRITICAL.value,
    "A standby SM's partitions file differs from what gpufabric wrote (a takeover would revert isolation), "
    "or cannot be read.",
)


def sm_file_violations(observed: IbFabricState) -> tuple[Violation, ...]:
    out = []
    for f in observed.sm_files:
        if f.role != "standby":
            continue
        if not f.sha256:
            msg = f"standby SM host {f.host}: partitions file unreadable ({f.error}); a takeover cannot be vouched for"
            sev = Severity.HIGH
        elif not f.expected:
            msg = f"standby SM host {f.host}: no verified partitions file of gpufabric to compare with (sha256 {f.sha256[:16]}...)"
            sev = Severity.HIGH
        elif f.sha256 != f.expected:
            msg = (
                f"standby SM host {f.host}: partitions file (sha256 {f.sha256[:16]}...) differs from what gpufabric "
                f"wrote ({f.expected[:16]}...): a takeover would program the fabric from it and revert tenant isolation"
            )
            sev = Severity.CRITICAL
        else:
            continue
        out.append(
            Violation(INVARIANT, sev, msg, fabric=KIND, device=f.host, resource=f"sm-host:{f.host}")
        )
    return tuple(out)
