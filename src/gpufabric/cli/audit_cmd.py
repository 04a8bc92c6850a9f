"""``gpufabric audit``: prove isolation from the fabrics' real state (not the store's view)."""

from __future__ import annotations

from pathlib import Path

from gpufabric.cli.common import JSON_OPT
from gpufabric.cli.decl import Option
from gpufabric.cli.output import console, emit_json
from gpufabric.domain.errors import ValidationError


def audit(
    json_out: bool = JSON_OPT,
    html: Path = Option(None, "--html", help="Also write a self-contained HTML report to this file."),
    fail_on: str = Option("low", "--fail-on", help="Exit non-zero on violations of this severity or worse."),
    only: list[str] = Option([], "--only", help="Check only these invariant ids (repeatable)."),
) -> None:
    """Read every fabric, check the isolation invariants against the leases, and report.
    Exit code 1 when a violation at or above --fail-on is found."""
    from gpufabric.audit import Severity

    try:
        threshold = Severity(fail_on)
    except ValueError:
        raise ValidationError("fail-on", fail_on, "critical, high, medium or low") from None
    from gpufabric.audit import exit_code, render_html
    from gpufabric.cli.audit_view import print_report
    from gpufabric.cli.backends.choose import backend

    report = backend().audit(tuple(only))  # here: this command reads the fabrics; --api: the server's audit
    if html is not None:
        html.write_text(render_html(report))
    if json_out:
        emit_json(report.to_dict())
    else:
        print_report(report, console)
        if html is not None:
            console.print(f"HTML report: {html}")
    code = exit_code(report, threshold)
    if code:
        import typer

        raise typer.Exit(code)
