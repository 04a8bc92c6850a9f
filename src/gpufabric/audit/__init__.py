"""Audit: pure isolation invariants over observed fabric state (fabric-neutral).

Public API: ``registry_for(kinds)``; ``AuditInput`` -> ``run_audit`` -> ``AuditReport``
(``to_dict``, ``render_html``, ``metrics_samples``, ``exit_code``). Each fabric's own checks
live in its package (``FabricKind.invariants`` / ``FabricKind.audit``); this package holds the
finding model, the cross-fabric checks, the registry and the renderers. Imports only
gpufabric.domain.
"""

from gpufabric.audit.checks_cross import SPLIT_FABRICS_ID, SPLIT_ID, TRANSPORT_ID
from gpufabric.audit.metrics import MetricSample, metrics_samples
from gpufabric.audit.model import (
    SCHEMA_VERSION,
    AuditInput,
    AuditReport,
    Finding,
    InvariantInfo,
    Severity,
    Violation,
)
from gpufabric.audit.registry import (
    CORE,
    DEFAULT_REGISTRY,
    Invariant,
    InvariantRegistry,
    exit_code,
    invariants_markdown,
    registry_for,
    run_audit,
)
from gpufabric.audit.render_html import render_html

__all__ = [
    "CORE",
    "DEFAULT_REGISTRY",
    "SCHEMA_VERSION",
    "SPLIT_FABRICS_ID",
    "SPLIT_ID",
    "TRANSPORT_ID",
    "AuditInput",
    "AuditReport",
    "Finding",
    "Invariant",
    "InvariantInfo",
    "InvariantRegistry",
    "MetricSample",
    "Severity",
    "Violation",
    "exit_code",
    "invariants_markdown",
    "metrics_samples",
    "registry_for",
    "render_html",
    "run_audit",
]
