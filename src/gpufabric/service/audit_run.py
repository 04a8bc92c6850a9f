"""Collect an audit's input from the store and the real fabrics, and run the pure audit.

The observed state comes from the drivers (OVSDB/SSH read-back, SMP reads of PKey tables,
SMInfo, and each registered fabric's backend), never from the store; the store only says who
should own what. Pass-through findings: every registered fabric kind's own findings
(``FabricKind.audit``: e.g. the trusted SM's hardening settings, ``IB-HARDENING``), and a node whose
resources on different fabrics belong to different tenants when any fabric beyond Ethernet
and InfiniBand is involved (``X-NODE-SPLIT-FABRICS``; the built-in pair is ``X-NODE-SPLIT``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable
from typing import Any

from gpufabric.audit import AuditInput, AuditReport, Violation, run_audit
from gpufabric.audit.model import Finding
from gpufabric.audit.registry import INVARIANTS, Invariant, InvariantRegistry
from gpufabric.domain.fabric import FabricKind
from gpufabric.domain.models import QUARANTINE, Fabric
from gpufabric.domain.secrets import TransportNote
from gpufabric.domain.severity import Severity
from gpufabric.domain.state import FabricState
from gpufabric.planning.desired import DesiredState
from gpufabric.service.moves import MoveEngine

BUILTIN = ("ethernet", "infiniband")
SPLIT_ID = "X-NODE-SPLIT-FABRICS"


def _passthrough(inv_id: str) -> Callable[[AuditInput, Any], Iterable[Finding]]:
    """A check that yields the extra findings naming ``inv_id``, severity kept."""

    def check(inp: AuditInput, _idx: Any) -> Iterable[Finding]:
        for v in inp.extra_findings:
            if v.invariant == inv_id:
                yield Finding(v.message, v.fabric, v.device, v.port, v.node, v.tenants, v.resource, v.severity)

    return check


def registry_for(kinds: Iterable[FabricKind[Any, Any]]) -> InvariantRegistry:
    """The built-in invariants plus every registered fabric kind's own (passed through)."""
    extra = [Invariant(SPLIT_ID, Severity.CRITICAL, "cross",
                       "A node's resources on different fabrics (NVLink, DPU, ... included) belong to different tenants.",
                       _passthrough(SPLIT_ID), external=True)]  # fmt: skip
    specs = {i.id: (k.name, i) for k in kinds for i in k.invariants()}  # once, however many instances a kind has
    extra += [Invariant(i.id, Severity(i.severity), kind, i.description, _passthrough(i.id), external=True)
              for kind, i in specs.values()]  # fmt: skip
    return InvariantRegistry((*INVARIANTS, *extra))


def fabric_violations(kinds: Iterable[FabricKind[Any, Any]], desired: DesiredState, observed: FabricState) -> list[Violation]:
    kinds = list(kinds)
    out: list[Violation] = []
    seen: dict[str, dict[str, frozenset[str]]] = {}
    for k in kinds:  # keyed by instance; a finding the kind names by its kind names its instance
        obs = observed.get(k.instance, k.empty_state())
        out += [v if v.fabric != k.name else dataclasses.replace(v, fabric=k.instance)
                for v in k.audit(desired.tenancy, desired.get(k.instance), obs)]  # fmt: skip
        seen[k.instance] = dict(k.tenants_seen(obs, desired.tenancy))
    kind_of = {k.instance: k.name for k in kinds}
    for node in sorted({n for m in seen.values() for n in m}):
        tenants = {f: t - {QUARANTINE} for f, m in seen.items() if (t := m.get(node))}
        every = frozenset().union(*tenants.values()) if tenants else frozenset()
        if len(every) > 1 and any(kind_of.get(f, f) not in BUILTIN for f, t in tenants.items() if t):
            where = "; ".join(f"{f}: {', '.join(sorted(t))}" for f, t in sorted(tenants.items()) if t)
            out.append(Violation(SPLIT_ID, Severity.CRITICAL, f"node {node} is split across tenants ({where})",
                                 fabric="cross", node=node, tenants=tuple(sorted(every))))  # fmt: skip
    return out


def transport_violations(drivers: Iterable[object]) -> tuple[Violation, ...]:
    """``TRANSPORT-INSECURE``: what each driver (or backend) reports about its own transport
    (``transport_notes()``: SSH without host-key checking, UFM over http or unverified TLS,
    OVSDB/OVN ``tcp:`` remotes, Kubernetes unverified or over http)."""
    out: list[Violation] = []
    fabrics = {f.value: f for f in Fabric}
    for d in drivers:
        notes: Callable[[], tuple[TransportNote, ...]] | None = getattr(d, "transport_notes", None)
        for n in notes() if notes is not None else ():
            fabric = fabrics.get(str(getattr(d, "kind", "")), Fabric.ETHERNET)
            out.append(Violation("TRANSPORT-INSECURE", Severity.HIGH, n.message, fabric=fabric, device=n.device,
                                 resource=f"transport:{n.setting}"))  # fmt: skip
    return tuple(out)


def collect(engine: MoveEngine, observed: FabricState | None = None) -> AuditInput:
    observed = observed if observed is not None else engine.fabrics.observe()
    view = engine.view()
    desired = engine.desired(view)
    ib = desired.get("infiniband")
    return AuditInput(
        nodes=view.nodes,
        leases=view.leases,
        networks=view.networks,
        quarantine_vlan=engine.cfg.quarantine_vlan,
        observed=observed,
        trusted_sm_guids=frozenset(engine.fabrics.trusted_sm_guids),
        sm_port_guids=frozenset(engine.fabrics.sm_port_guids),
        desired_switches=desired.get("ethernet"),
        desired_layout=ib.layout if ib is not None else None,
        extra_findings=(
            *fabric_violations(engine.kinds, desired, observed),
            *transport_violations(
                [*engine.fabrics.switches.values(), engine.fabrics.sm, *engine.fabrics.backends.values()]
            ),
        ),
    )


def audit(
    engine: MoveEngine, observed: FabricState | None = None, only: Collection[str] | None = None
) -> AuditReport:
    return run_audit(collect(engine, observed), only=only, registry=registry_for(engine.kinds))
