"""The audit report's outputs: stable JSON schema, ordering, exit code, HTML, metrics,
the CLI tables, and docs/audit.md kept equal to the registry."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console

from gpufabric.audit import (
    SCHEMA_VERSION,
    AuditReport,
    Severity,
    Violation,
    exit_code,
    invariants_markdown,
    metrics_samples,
    render_html,
    run_audit,
)
from gpufabric.cli.audit_view import print_report
from gpufabric.domain.state import FabricState

from unit.audit_scenarios import REGISTRY, T0, Scenario, guid

DOC = Path(__file__).resolve().parents[2] / "docs" / "audit.md"


def broken_report() -> AuditReport:
    """Several violations of several severities."""
    s = Scenario()
    s.set_eth("b1", "access", 2001)  # ETH-VLAN-SHARED, X-NODE-SPLIT (critical), X-DRIFT
    s.set_eth("g1", "access", 1)  # ETH-VLAN1 (high), X-DRIFT
    s.set_pkeys(guid("a1", 0), 0x8A01, 0x7FFF, capacity=1)  # IB-PKEY-CAPACITY (medium)
    return run_audit(s.build(), now=T0, clock=iter([1.0, 1.25]).__next__, registry=REGISTRY)


def report_of(*severities: Severity) -> AuditReport:
    vs = tuple(
        Violation("X-DRIFT", sev, f"v{i}", "ethernet", "leaf1", f"p{i}") for i, sev in enumerate(severities)
    )
    return AuditReport(T0, 0.5, ("X-DRIFT",), vs)


# ------------------------------------------------------------------ JSON
def test_json_schema_keys_are_stable() -> None:
    d = broken_report().to_dict()
    assert list(d) == ["schema_version", "generated_at", "duration_seconds", "ok", "checked_invariants", "summary",
                       "violations"]  # fmt: skip
    assert d["schema_version"] == SCHEMA_VERSION == 1
    assert list(d["summary"]) == ["total", "by_severity", "by_invariant"]
    assert list(d["summary"]["by_severity"]) == ["critical", "high", "medium", "low"]
    assert list(d["summary"]["by_invariant"]) == list(REGISTRY.ids())
    for v in d["violations"]:
        assert list(v) == [
            "invariant",
            "severity",
            "fabric",
            "device",
            "port",
            "node",
            "tenants",
            "resource",
            "message",
        ]
    json.dumps(d)  # serialisable as is


def test_json_values() -> None:
    d = broken_report().to_dict()
    assert d["generated_at"] == "2025-01-01T00:00:00+00:00"
    assert d["duration_seconds"] == 0.25
    assert d["ok"] is False
    assert d["summary"]["total"] == len(d["violations"]) == 6
    assert d["summary"]["by_severity"] == {"critical": 2, "high": 1, "medium": 3, "low": 0}
    assert d["summary"]["by_invariant"]["ETH-VLAN-SHARED"] == 1
    assert d["summary"]["by_invariant"]["IB-ROGUE-SM"] == 0
    first = d["violations"][0]
    assert first == {
        "invariant": "ETH-VLAN-SHARED", "severity": "critical", "fabric": "ethernet", "device": "leaf1",
        "port": "p2", "node": "b1", "tenants": ["alpha", "beta"], "resource": "vlan:2001",
        "message": "vlan 2001 on leaf1/p2 (node b1, tenant beta) is shared with tenant(s) alpha",
    }  # fmt: skip


def test_violations_sorted_worst_first_and_deterministic() -> None:
    a = broken_report()
    sev = [v.severity.rank for v in a.violations]
    assert sev == sorted(sev, reverse=True)
    assert [v.invariant for v in a.violations] == [
        "ETH-VLAN-SHARED", "X-NODE-SPLIT", "ETH-VLAN1", "IB-PKEY-CAPACITY", "X-DRIFT", "X-DRIFT"
    ]  # fmt: skip
    assert broken_report().to_dict() == a.to_dict()


def test_result_does_not_depend_on_input_order() -> None:
    s = Scenario()
    s.set_eth("b1", "access", 2001)
    s.set_pkeys(guid("q1", 0), 0x8A01, 0x7FFF)
    inp = s.build()
    obs = inp.observed
    ib = obs.get("infiniband")
    shuffled = replace(
        inp,
        nodes=inp.nodes[::-1],
        leases=inp.leases[::-1],
        networks=inp.networks[::-1],
        observed=FabricState(slices={
            "ethernet": tuple(replace(sw, ports=sw.ports[::-1]) for sw in obs.get("ethernet")[::-1]),
            "infiniband": replace(ib, tables=ib.tables[::-1], sms=ib.sms[::-1]),
        }),
    )
    a, b = run_audit(inp, now=T0, registry=REGISTRY), run_audit(shuffled, now=T0, registry=REGISTRY)
    assert len(a.violations) == 7  # b1: shared, split, drift; q1 port: foreign, shared, split, drift
    assert [v.to_dict() for v in a.violations] == [v.to_dict() for v in b.violations]


def test_clean_report_is_ok() -> None:
    d = run_audit(Scenario().build(), now=T0, registry=REGISTRY).to_dict()
    assert d["ok"] is True
    assert d["violations"] == []
    assert d["summary"]["total"] == 0


def test_default_timestamp_is_utc_now() -> None:
    before = datetime.now(UTC)
    report = run_audit(Scenario().build(), only=["ETH-VLAN1"], registry=REGISTRY)
    assert before <= report.generated_at <= datetime.now(UTC)
    assert report.checked == ("ETH-VLAN1",)


# ------------------------------------------------------------------ exit code
@pytest.mark.parametrize(
    ("severities", "fail_on", "code"),
    [
        ((), Severity.LOW, 0),
        ((Severity.LOW,), Severity.LOW, 1),
        ((Severity.MEDIUM,), Severity.HIGH, 0),
        ((Severity.HIGH,), Severity.HIGH, 1),
        ((Severity.CRITICAL, Severity.LOW), Severity.CRITICAL, 1),
        ((Severity.HIGH, Severity.MEDIUM), Severity.CRITICAL, 0),
    ],
    ids=["none", "low-at-low", "medium-below-high", "high-at-high", "critical-at-critical", "high-below-critical"],
)
def test_exit_code(severities: tuple[Severity, ...], fail_on: Severity, code: int) -> None:
    assert exit_code(report_of(*severities), fail_on) == code


# ------------------------------------------------------------------ HTML
def test_html_lists_every_violation_grouped_by_severity() -> None:
    report = broken_report()
    html = render_html(report)
    assert html.startswith("<!DOCTYPE html>")
    for v in report.violations:
        assert f"<code>{v.invariant}</code>" in html
        assert v.port in html
    assert html.index('id="sev-critical"') < html.index('id="sev-high"') < html.index('id="sev-medium"')
    assert 'id="sev-low"' not in html
    for inv_id in REGISTRY.ids():
        assert f"<code>{inv_id}</code>" in html
    assert "http://" not in html and "https://" not in html and "<script" not in html and "<link" not in html


def test_html_escapes_content() -> None:
    evil = Violation("X-DRIFT", Severity.HIGH, "<script>alert(1)</script>", "ethernet", "sw&1", '"p1"', "n<1>")
    html = render_html(AuditReport(T0, 0.1, ("X-DRIFT",), (evil,)))
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "sw&amp;1" in html and "&quot;p1&quot;" in html and "n&lt;1&gt;" in html


def test_html_of_clean_report_says_so() -> None:
    html = render_html(run_audit(Scenario().build(), now=T0, registry=REGISTRY))
    assert "No violations" in html


# ------------------------------------------------------------------ metrics
def test_metrics_samples() -> None:
    report = replace(broken_report(), duration_seconds=0.25)
    samples = metrics_samples(report)
    by = {(name, tuple(sorted(labels.items()))): value for name, labels, value in samples}
    assert by[("gpufabric_audit_violations", (("invariant", "X-DRIFT"), ("severity", "medium")))] == 2.0
    assert by[("gpufabric_audit_violations", (("invariant", "IB-ROGUE-SM"), ("severity", "critical")))] == 0.0
    assert by[("gpufabric_audit_violations_by_severity", (("severity", "critical"),))] == 2.0
    assert by[("gpufabric_audit_last_timestamp_seconds", ())] == T0.timestamp()
    assert by[("gpufabric_audit_duration_seconds", ())] == 0.25
    n_violation_series = sum(1 for name, _, _ in samples if name == "gpufabric_audit_violations")
    assert n_violation_series == len(REGISTRY.ids())


# ------------------------------------------------------------------ CLI tables
def test_cli_tables_group_by_severity() -> None:
    console = Console(record=True, width=250, color_system=None)
    print_report(broken_report(), console)
    text = console.export_text()
    assert "6 violation(s)" in text
    assert text.index("critical: 2 violation(s)") < text.index("high: 1 violation(s)")
    assert text.index("high: 1 violation(s)") < text.index("medium: 3 violation(s)")
    assert str(guid("a1", 0)) in text and "ETH-VLAN-SHARED" in text


def test_cli_does_not_interpret_markup_in_values() -> None:
    v = Violation("X-DRIFT", Severity.LOW, "[bold]x[/bold] on [red]p1", "ethernet", "leaf1", "p1")
    console = Console(record=True, width=250, color_system=None)
    print_report(AuditReport(T0, 0.1, ("X-DRIFT",), (v,)), console)
    assert "[bold]x[/bold] on [red]p1" in console.export_text()


def test_cli_ok_line() -> None:
    console = Console(record=True, width=250, color_system=None)
    print_report(run_audit(Scenario().build(), now=T0, registry=REGISTRY), console)
    text = console.export_text()
    assert text.startswith(f"OK: {len(REGISTRY.ids())} invariant(s) checked, no violation")


# ------------------------------------------------------------------ docs
def test_doc_invariant_table_equals_registry() -> None:
    text = DOC.read_text()
    begin, end = "<!-- invariants:begin -->\n", "<!-- invariants:end -->"
    table = text[text.index(begin) + len(begin) : text.index(end)]
    assert table == invariants_markdown(REGISTRY)


def test_doc_lists_every_json_field() -> None:
    text = DOC.read_text()
    d = broken_report().to_dict()
    for key in [*d, *d["summary"]]:
        assert f"`{key}`" in text or f"`summary.{key}`" in text, key
    for key in d["violations"][0]:
        assert f"`violations[].{key}`" in text, key
