"""Prometheus metrics of ``gpufabric serve``: audit violations by invariant, last audit
time, audit duration, reconcile drift and errors, and each configured fabric's own series
(``fabric_metrics``; e.g. the DPU offload report), cached between scrapes. One registry per
process object (no module-global collectors)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from gpufabric.audit import AuditReport, metrics_samples
from gpufabric.domain.errors import GpufabricError
from gpufabric.domain.state import FabricState
from gpufabric.engine.audit_run import audit
from gpufabric.engine.moves import MoveEngine
from gpufabric.engine.reconcile import ReconcileResult


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


def fabric_metrics(engine: MoveEngine) -> str:
    """Every configured fabric's own series (``FabricBackend.metrics``), read now. A fabric
    that cannot be read gives ``gpufabric_fabric_metrics_failed{fabric} 1`` instead."""
    tenancy = engine.tenancy()
    out: list[str] = []
    failed: list[str] = []
    for name, backend in sorted(engine.fabrics.backends.items()):
        try:
            out.append(backend.metrics(tenancy))
        except GpufabricError:
            failed.append(name)
    if failed:
        out.append("# TYPE gpufabric_fabric_metrics_failed gauge\n")
        out += [f'gpufabric_fabric_metrics_failed{{fabric="{n}"}} 1\n' for n in failed]
    return "".join(out)


class Cached:
    """``fn()`` at most once per ``ttl`` seconds (a scrape every few seconds must not read every
    DPU each time); the last value in between."""

    def __init__(self, fn: Callable[[], str], ttl: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.fn, self.ttl, self.clock = fn, ttl, clock
        self._at: float | None = None
        self._value = ""
        self._lock = threading.Lock()

    def __call__(self) -> str:
        with self._lock:
            now = self.clock()
            if self._at is None or now - self._at >= self.ttl:
                self._value, self._at = self.fn(), now
            return self._value
