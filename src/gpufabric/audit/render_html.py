"""A self-contained HTML audit report (inline CSS, no external assets, every value escaped)
that an operator can attach to a ticket: summary, violations by severity, invariants checked."""

from __future__ import annotations

from html import escape
from typing import Final

from gpufabric.audit.model import AuditReport, Severity, Violation
from gpufabric.audit.registry import DEFAULT_REGISTRY, InvariantRegistry

_CSS: Final = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em;color:#222}
h1{margin-bottom:.2em}.meta{color:#555;margin-top:0}
table{border-collapse:collapse;margin:.5em 0 1.5em;width:100%}
th,td{border:1px solid #ccc;padding:.3em .5em;text-align:left;vertical-align:top;font-size:.9em}
th{background:#f2f2f2}td.mono,code{font-family:ui-monospace,monospace}
.ok{color:#0a7d25;font-weight:bold}.bad{color:#b00020;font-weight:bold}
.sev{display:inline-block;padding:0 .5em;border-radius:.3em;color:#fff}
.sev-critical{background:#8b0000}.sev-high{background:#d9480f}
.sev-medium{background:#b08800}.sev-low{background:#5c7080}
"""

_COLUMNS: Final = ("invariant", "fabric", "device", "port / GUID", "node", "tenants", "resource", "message")


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _badge(sev: Severity) -> str:
    return f'<span class="sev sev-{sev.value}">{_e(sev.value)}</span>'


def _row(v: Violation) -> str:
    cells = (
        f"<code>{_e(v.invariant)}</code>",
        _e(str(v.fabric or "")),
        _e(v.device),
        f'<span class="mono">{_e(v.port)}</span>',
        _e(v.node),
        _e(", ".join(v.tenants)),
        _e(v.resource),
        _e(v.message),
    )
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def render_html(report: AuditReport, registry: InvariantRegistry = DEFAULT_REGISTRY) -> str:
    """The whole report as one HTML document (invariants described by the report's ``about``,
    else by ``registry``)."""
    counts = report.counts_by_severity()
    status = (
        '<p class="ok">No violations: every checked invariant holds.</p>'
        if report.ok
        else f'<p class="bad">{len(report.violations)} violation(s).</p>'
    )
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>gpufabric isolation audit</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>gpufabric isolation audit</h1>",
        f'<p class="meta">Generated {_e(report.generated_at.isoformat())} in '
        f"{report.duration_seconds:.3f} s; {len(report.checked)} invariant(s) checked.</p>",
        status,
        "<h2>Summary</h2>",
        "<table><tr><th>severity</th><th>violations</th></tr>",
        *(f"<tr><td>{_badge(Severity(s))}</td><td>{n}</td></tr>" for s, n in counts.items()),
        "</table>",
    ]
    for sev, group in report.by_severity().items():
        out.append(f'<h2 id="sev-{sev.value}">{_badge(sev)} {len(group)} {_e(sev.value)} violation(s)</h2>')
        out.append("<table><tr>" + "".join(f"<th>{_e(c)}</th>" for c in _COLUMNS) + "</tr>")
        out.extend(_row(v) for v in group)
        out.append("</table>")
    by_inv = report.counts_by_invariant()
    known = {i.id: i.info() for i in registry}
    known.update({i.id: i for i in report.about})
    out.append("<h2>Invariants checked</h2>")
    out.append("<table><tr><th>id</th><th>severity</th><th>description</th><th>violations</th></tr>")
    for inv_id in report.checked:
        inv = known.get(inv_id)
        badge = _badge(inv.severity) if inv else ""
        desc = _e(inv.description) if inv else ""
        out.append(
            f"<tr><td><code>{_e(inv_id)}</code></td><td>{badge}</td><td>{desc}</td><td>{by_inv.get(inv_id, 0)}</td></tr>"
        )
    out.append("</table></body></html>")
    return "\n".join(out) + "\n"
