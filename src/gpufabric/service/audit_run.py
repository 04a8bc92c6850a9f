"""Collect an audit's input from the store and the real fabrics, and run the pure audit.

The observed state comes from the drivers (OVSDB/SSH read-back, SMP reads of PKey
tables, SMInfo), never from the store; the store only says who should own what.
Hardening findings of the trusted SM's settings pass through as ``IB-HARDENING``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gpufabric.audit import AuditInput, AuditReport, Violation, run_audit
from gpufabric.domain.models import Fabric
from gpufabric.domain.secrets import TransportNote
from gpufabric.domain.severity import Severity
from gpufabric.domain.state import FabricState
from gpufabric.fabrics.infiniband.hardening import check_hardening
from gpufabric.service.moves import MoveEngine


def hardening_violations(observed: FabricState) -> tuple[Violation, ...]:
    settings = dict(observed.ib.settings)
    if not settings:
        return ()
    return tuple(
        Violation(
            "IB-HARDENING",
            f.severity,
            f"{f.setting} = {f.observed!r}: {f.description} (expected {f.expected})",
            fabric=Fabric.INFINIBAND,
            device="opensm",
            resource=f"setting:{f.setting}",
        )
        for f in check_hardening(settings)
    )


def transport_violations(drivers: Iterable[object]) -> tuple[Violation, ...]:
    """``TRANSPORT-INSECURE``: what each driver reports about its own transport
    (``transport_notes()``: SSH without host-key checking, UFM over http or unverified TLS)."""
    out: list[Violation] = []
    for d in drivers:
        notes: Callable[[], tuple[TransportNote, ...]] | None = getattr(d, "transport_notes", None)
        for n in notes() if notes is not None else ():
            fabric = Fabric.INFINIBAND if getattr(d, "kind", "") == "infiniband" else Fabric.ETHERNET
            out.append(Violation("TRANSPORT-INSECURE", Severity.HIGH, n.message, fabric=fabric, device=n.device,
                                 resource=f"transport:{n.setting}"))  # fmt: skip
    return tuple(out)


def collect(engine: MoveEngine, observed: FabricState | None = None) -> AuditInput:
    observed = observed if observed is not None else engine.fabrics.observe()
    view = engine.view()
    desired = engine.desired(view)
    return AuditInput(
        nodes=view.nodes,
        leases=view.leases,
        networks=view.networks,
        quarantine_vlan=engine.cfg.quarantine_vlan,
        observed=observed,
        trusted_sm_guids=frozenset(engine.fabrics.trusted_sm_guids),
        sm_port_guids=frozenset(engine.fabrics.sm_port_guids),
        desired_switches=desired.switches,
        desired_layout=desired.ib if engine.fabrics.sm is not None else None,
        extra_findings=hardening_violations(observed)
        + transport_violations([*engine.fabrics.switches.values(), engine.fabrics.sm]),
    )


def audit(engine: MoveEngine, observed: FabricState | None = None) -> AuditReport:
    return run_audit(collect(engine, observed))
