"""Metric samples of an audit report, as plain values: the service layer feeds them to
prometheus_client (this module stays pure and imports no metrics library).

Samples (name, labels, value):

* ``gpufabric_audit_violations{invariant, severity}``: violations per checked invariant (0 included)
* ``gpufabric_audit_violations_by_severity{severity}``: violations per severity (0 included)
* ``gpufabric_audit_last_timestamp_seconds``: when the report was made (Unix time)
* ``gpufabric_audit_duration_seconds``: how long the audit core took
"""

from __future__ import annotations

from typing import Final

from gpufabric.audit.model import AuditReport, Severity
from gpufabric.audit.registry import DEFAULT_REGISTRY, InvariantRegistry

MetricSample = tuple[str, dict[str, str], float]

VIOLATIONS: Final = "gpufabric_audit_violations"
VIOLATIONS_BY_SEVERITY: Final = "gpufabric_audit_violations_by_severity"
LAST_TIMESTAMP: Final = "gpufabric_audit_last_timestamp_seconds"
DURATION: Final = "gpufabric_audit_duration_seconds"


def metrics_samples(report: AuditReport, registry: InvariantRegistry = DEFAULT_REGISTRY) -> list[MetricSample]:
    """Every sample of ``report``, in a fixed order. A checked invariant's severity comes from
    the report (``about``), else from ``registry``."""
    severity = {i.id: i.severity for i in registry}
    severity.update({i.id: i.severity for i in report.about})
    per_pair: dict[tuple[str, str], int] = {}
    for inv_id in report.checked:
        per_pair[(inv_id, severity.get(inv_id, Severity.LOW).value)] = 0
    for v in report.violations:
        key = (v.invariant, v.severity.value)
        per_pair[key] = per_pair.get(key, 0) + 1
    samples: list[MetricSample] = [
        (VIOLATIONS, {"invariant": inv, "severity": sev}, float(n)) for (inv, sev), n in sorted(per_pair.items())
    ]
    samples += [(VIOLATIONS_BY_SEVERITY, {"severity": s}, float(n)) for s, n in report.counts_by_severity().items()]
    samples.append((LAST_TIMESTAMP, {}, report.generated_at.timestamp()))
    samples.append((DURATION, {}, report.duration_seconds))
    return samples
