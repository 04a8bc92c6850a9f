"""Collect an audit's input from the store and the real fabrics, and run the pure audit.

The observed state comes from each configured fabric's backend (``observe()``: OVSDB/SSH
read-back, SMP reads of PKey tables, SMInfo, Fabric Manager, ...), never from the store; the
store only says who should own what. The audit's registry is collected from the configured
fabric kinds (``registry_for``): each kind checks its own invariants (``FabricKind.audit``),
the audit core the cross-fabric ones. Pass-through findings: what every backend reports about
its own transport (``TRANSPORT-INSECURE``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

from gpufabric.audit import AuditInput, AuditReport, Violation, registry_for, run_audit
from gpufabric.audit.checks_cross import SPLIT_FABRICS_ID as SPLIT_ID
from gpufabric.domain.severity import Severity
from gpufabric.domain.state import FabricState
from gpufabric.engine.moves import MoveEngine
from gpufabric.transport.secrets import TransportNote

__all__ = ["SPLIT_ID", "audit", "collect", "transport_violations"]


def transport_violations(sources: Iterable[tuple[str, Any]]) -> tuple[Violation, ...]:
    """``TRANSPORT-INSECURE``: what each (fabric name, backend or driver) reports about its own
    transport (``transport_notes()``: SSH without host-key checking, UFM over http or unverified
    TLS, OVSDB/OVN ``tcp:`` remotes, Kubernetes unverified or over http, Fabric Manager over TCP).
    A source's own ``kind`` attribute, when it has one, names its fabric."""
    out: list[Violation] = []
    for fabric, d in sources:
        notes: Callable[[], tuple[TransportNote, ...]] | None = getattr(d, "transport_notes", None)
        for n in notes() if notes is not None else ():
            out.append(Violation("TRANSPORT-INSECURE", Severity.HIGH, n.message, fabric=str(getattr(d, "kind", "") or fabric),
                                 device=n.device, resource=f"transport:{n.setting}"))  # fmt: skip
    return tuple(out)


def collect(engine: MoveEngine, observed: FabricState | None = None) -> AuditInput:
    observed = observed if observed is not None else engine.fabrics.observe()
    view = engine.view()
    desired = engine.desired(view)
    return AuditInput(
        nodes=view.nodes,
        leases=view.leases,
        networks=view.networks,
        observed=observed,
        settings=desired.tenancy.settings,
        desired={k.instance: desired.get(k.instance) for k in engine.kinds},
        offerings=view.offerings,
        held=frozenset(view.held_in_quarantine),
        extra_findings=transport_violations(engine.fabrics.backends.items()),
    )


def audit(
    engine: MoveEngine, observed: FabricState | None = None, only: Collection[str] | None = None
) -> AuditReport:
    return run_audit(collect(engine, observed), only=only, registry=registry_for(engine.kinds))
