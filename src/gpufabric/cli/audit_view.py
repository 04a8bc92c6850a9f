"""Rich rendering of an audit report for the terminal: a summary line and table by
severity, then one table of violations per severity (worst first).

Only rendering: the ``audit`` command (wired by the lead) collects the input, runs
``gpufabric.audit.run_audit``, prints with :func:`print_report` and exits with
``gpufabric.audit.exit_code``.
"""

from __future__ import annotations

from typing import Final

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpufabric.audit import AuditReport, Severity

SEVERITY_STYLE: Final = {
    Severity.CRITICAL: "bold white on red",
    Severity.HIGH: "bold red",
    Severity.MEDIUM: "yellow",
    Severity.LOW: "cyan",
}


def summary_table(report: AuditReport) -> Table:
    t = Table(title="Audit summary")
    t.add_column("severity")
    t.add_column("violations", justify="right")
    for sev, n in report.counts_by_severity().items():
        t.add_row(f"[{SEVERITY_STYLE[Severity(sev)]}]{sev}[/]", str(n))
    return t


def violation_tables(report: AuditReport) -> list[Table]:
    """One table per severity that has violations, worst first."""
    tables = []
    for sev, group in report.by_severity().items():
        t = Table(title=f"{sev.value}: {len(group)} violation(s)", title_style=SEVERITY_STYLE[sev])
        for col in ("invariant", "fabric", "device", "port / GUID", "node", "tenants", "message"):
            t.add_column(col, overflow="fold")
        for v in group:
            cells = (v.invariant, str(v.fabric or ""), v.device, v.port, v.node, ", ".join(v.tenants))
            t.add_row(*(Text(c) for c in (*cells, v.message)))
        tables.append(t)
    return tables


def print_report(report: AuditReport, console: Console | None = None) -> None:
    """Print the whole report; markup in values is never interpreted."""
    out = console or Console()
    if report.ok:
        out.print(
            f"[bold green]OK[/]: {len(report.checked)} invariant(s) checked, no violation "
            f"({report.duration_seconds:.3f} s)."
        )
        return
    out.print(
        f"[bold red]{len(report.violations)} violation(s)[/] of {len(report.checked)} invariant(s) checked "
        f"({report.duration_seconds:.3f} s)."
    )
    out.print(summary_table(report))
    for t in violation_tables(report):
        out.print(t)
