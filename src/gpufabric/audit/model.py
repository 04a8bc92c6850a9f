"""The audit's values: severities, violations, the audit input and the report (fabric-neutral).

Everything here is an immutable value. ``AuditReport.to_dict`` is the stable JSON
schema documented in ``docs/audit.md`` (bump ``SCHEMA_VERSION`` on any breaking change).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from gpufabric.domain.findings import Violation as Violation
from gpufabric.domain.models import Lease, Network, Node, Offering
from gpufabric.domain.severity import Severity as Severity
from gpufabric.domain.state import FabricState

SCHEMA_VERSION: Final = 1


@dataclass(frozen=True)
class Finding:
    """What a check function yields: a violation without its invariant id and severity,
    which the registry adds (``severity`` here overrides it, for pass-through findings)."""

    message: str
    fabric: str | None = None
    device: str = ""
    port: str = ""
    node: str = ""
    tenants: tuple[str, ...] = ()
    resource: str = ""
    severity: Severity | None = None

    def violation(self, invariant: str, severity: Severity) -> Violation:
        return Violation(
            invariant=invariant,
            severity=self.severity or severity,
            message=self.message,
            fabric=self.fabric,
            device=self.device,
            port=self.port,
            node=self.node,
            tenants=self.tenants,
            resource=self.resource,
        )


@dataclass(frozen=True)
class AuditInput:
    """Everything one audit looks at; the caller collects it (store + drivers).

    * ``nodes``: the inventory with every node's ports on every fabric.
    * ``leases``: the *active* leases (a node without one belongs to quarantine).
    * ``networks``: tenants' networks with their per-fabric segments.
    * ``observed``: what the backends read from the real fabrics, one slice per fabric.
    * ``settings``: the deployment-wide facts fabric kinds derive from (``Tenancy.settings``,
      e.g. ``quarantine_vlan``, ``trusted_sm_guids``, ``sm_port_guids``).
    * ``desired``: each fabric's desired slice derived from the leases; ``None`` (or a fabric
      left out) means "not given" and skips that fabric's desired-vs-observed comparison.
    * ``offerings``; ``held``: nodes that moves in flight hold in quarantine whatever their lease.
    * ``extra_findings``: violations computed elsewhere (e.g. the drivers' transport notes);
      each must name a pass-through (external) invariant (``TRANSPORT-INSECURE``).
    """

    nodes: tuple[Node, ...]
    leases: tuple[Lease, ...]
    networks: tuple[Network, ...]
    observed: FabricState
    settings: Mapping[str, Any] = field(default_factory=dict)
    desired: Mapping[str, Any] | None = None
    offerings: tuple[Offering, ...] = ()
    held: frozenset[str] = frozenset()
    extra_findings: tuple[Violation, ...] = ()


@dataclass(frozen=True)
class InvariantInfo:
    """What a report says of one checked invariant (HTML table, metrics series)."""

    id: str
    severity: Severity
    fabric: str
    description: str


@dataclass(frozen=True)
class AuditReport:
    """The result of one audit: violations sorted worst first, then by place."""

    generated_at: datetime
    duration_seconds: float
    checked: tuple[str, ...]
    violations: tuple[Violation, ...] = field(default_factory=tuple)
    about: tuple[InvariantInfo, ...] = ()  # the checked invariants' severity and description

    @property
    def ok(self) -> bool:
        return not self.violations

    def counts_by_severity(self) -> dict[str, int]:
        """Every severity, worst first, zero included."""
        counts = {s.value: 0 for s in Severity.ordered()}
        for v in self.violations:
            counts[v.severity.value] += 1
        return counts

    def counts_by_invariant(self) -> dict[str, int]:
        """Every checked invariant (zero included), plus any id seen in the violations."""
        counts = dict.fromkeys(self.checked, 0)
        for v in self.violations:
            counts[v.invariant] = counts.get(v.invariant, 0) + 1
        return counts

    def by_severity(self) -> dict[Severity, tuple[Violation, ...]]:
        """The violations grouped by severity, worst first; empty groups left out."""
        groups: dict[Severity, list[Violation]] = {}
        for v in self.violations:
            groups.setdefault(v.severity, []).append(v)
        return {s: tuple(groups[s]) for s in Severity.ordered() if s in groups}

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON form; see docs/audit.md."""
        return {
            "schema_version": SCHEMA_VERSION,
            "generated_at": self.generated_at.isoformat(),
            "duration_seconds": self.duration_seconds,
            "ok": self.ok,
            "checked_invariants": list(self.checked),
            "summary": {
                "total": len(self.violations),
                "by_severity": self.counts_by_severity(),
                "by_invariant": self.counts_by_invariant(),
            },
            "violations": [v.to_dict() for v in self.violations],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AuditReport:
        """The report ``to_dict`` wrote (the API's audit, read by the CLI through ``--api``)."""
        return cls(datetime.fromisoformat(d["generated_at"]), float(d["duration_seconds"]),
                   tuple(d["checked_invariants"]), tuple(Violation.from_dict(v) for v in d["violations"]))  # fmt: skip

    def only(self, invariants: tuple[str, ...]) -> AuditReport:
        """This report narrowed to ``invariants`` (``audit --only``); all of it when none given."""
        if not invariants:
            return self
        return AuditReport(self.generated_at, self.duration_seconds, tuple(i for i in self.checked if i in invariants),
                           tuple(v for v in self.violations if v.invariant in invariants),
                           tuple(a for a in self.about if a.id in invariants))  # fmt: skip
