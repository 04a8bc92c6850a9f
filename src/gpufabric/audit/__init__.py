"""Audit: pure isolation invariants over observed fabric state.

Public API: ``AuditInput`` -> ``run_audit`` -> ``AuditReport`` (``to_dict``,
``render_html``, ``metrics_samples``, ``exit_code``). Imports only gpufabric.domain.
"""

from gpufabric.audit.metrics import MetricSample, metrics_samples
from gpufabric.audit.model import SCHEMA_VERSION, AuditInput, AuditReport, Finding, Severity, Violation
from gpufabric.audit.registry import (
    DEFAULT_REGISTRY,
    INVARIANTS,
    Invariant,
    InvariantRegistry,
    exit_code,
    invariants_markdown,
    run_audit,
)
from gpufabric.audit.render_html import render_html

__all__ = [
    "DEFAULT_REGISTRY",
    "INVARIANTS",
    "SCHEMA_VERSION",
    "AuditInput",
    "AuditReport",
    "Finding",
    "Invariant",
    "InvariantRegistry",
    "MetricSample",
    "Severity",
    "Violation",
    "exit_code",
    "invariants_markdown",
    "metrics_samples",
    "render_html",
    "run_audit",
]
