"""Prometheus metrics of ``gpufabric serve``: audit violations by invariant, last audit
time, audit duration, reconcile drift and errors. One registry per process object (no
module-global collectors)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from gpufabric.audit import AuditReport, metrics_samples
from gpufabric.domain.state import FabricState
from gpufabric.service.audit_run import audit
from gpufabric.service.moves import MoveEngine
from gpufabric.service.reconcile import ReconcileResult


class Telemetry:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.violations = Gauge(
            "gpufabric_audit_violations", "Violations per invariant", ["invariant", "severity"], registry=r
        )
        self.by_severity = Gauge(
            "gpufabric_audit_violations_by_severity", "Violations per severity", ["severity"], registry=r
        )
        self.last = Gauge("gpufabric_audit_last_timestamp_seconds", "Unix time of the last audit", registry=r)
        self.duration = Gauge("gpufabric_audit_duration_seconds", "Duration of the audit core", registry=r)
        self.drift = Gauge("gpufabric_reconcile_drift", "Drifted items found by the last reconcile pass", registry=r)
        self.errors = Counter("gpufabric_errors", "Failed reconcile/audit passes", ["kind"], registry=r)

    def record_reconcile(self, result: ReconcileResult) -> None:
        self.drift.set(len(result.drift.lines()))

    def record_audit(self, engine: MoveEngine, observed: FabricState | None = None) -> AuditReport:
        """Audit (on ``observed`` when given: the reconcile pass's read of the fabrics), set the gauges,
        and return the report."""
        report = audit(engine, observed)
        self.record_report(report)
        return report

    def record_report(self, report: AuditReport) -> None:
        gauges = {
            "gpufabric_audit_violations": self.violations,
            "gpufabric_audit_violations_by_severity": self.by_severity,
        }
        for name, labels, value in metrics_samples(report):
            if name in gauges:
                gauges[name].labels(**labels).set(value)
            elif name == "gpufabric_audit_last_timestamp_seconds":
                self.last.set(value)
            elif name == "gpufabric_audit_duration_seconds":
                self.duration.set(value)

    def record_error(self, e: Exception) -> None:
        self.errors.labels(kind=type(e).__name__).inc()

    def render(self) -> str:
        return generate_latest(self.registry).decode()
