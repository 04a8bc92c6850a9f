"""``gpufabric site check``: the preflight of a site (see :mod:`gpufabric.runtime.site_check`),
one line per check, ``--json`` for machines, progress on stderr; the exit code says the worst
finding: 0 all ok, 1 a warning, 3 an error, 4 a critical finding (2: the command could not run)."""

from __future__ import annotations

import os

from gpufabric.cli.common import JSON_OPT, fabrics_path, home, segment_config
from gpufabric.cli.decl import Group, Option
from gpufabric.cli.output import console, emit_json, err_console, escape

app = Group(no_args_is_help=True)

_STYLE = {"ok": "green", "warning": "yellow", "error": "red", "critical": "bold red"}


@app.command("check")
def check(
    clock_bound: float = Option(2.0, "--clock-bound", min=0.0, help="Largest clock offset (s) allowed between "
                                "this host and the store (PostgreSQL now())."),
    quiet: bool = Option(False, "--quiet", "-q", help="Print only the findings that are not ok."),
    json_out: bool = JSON_OPT,
) -> None:
    """Check the configured site before go-live (devices, SMs, pools, inventory, store, clocks); changes nothing.
    Exit code: 0 ok, 1 warning, 3 error, 4 critical."""
    from gpufabric.runtime.site_check import run_site_check
    from gpufabric.store.db import resolve_url

    def say(msg: str) -> None:  # stderr: stdout stays the report (or its JSON)
        err_console.print(f"[dim]site check:[/] {escape(msg)}", highlight=False)

    url = resolve_url(os.environ.get("GPUFABRIC_DB") or None, home())
    report = run_site_check(url, segment_config, fabrics_path(), clock_bound=clock_bound, progress=say)
    if json_out:
        emit_json(report.to_dict())
    else:
        for c in report.checks:
            if quiet and c.level.value == "ok":
                continue
            style = _STYLE[c.level.value]
            console.print(f"[{style}]{c.level.value:<8}[/] {c.id:<20} {escape(c.message)}", highlight=False, soft_wrap=True)
        counts = report.to_dict()["counts"]
        console.print(f"site check: {report.worst.value} ({', '.join(f'{n} {k}' for k, n in counts.items())}) in "
                      f"{report.seconds:.1f}s, exit {report.exit_code}", highlight=False)  # fmt: skip
    import typer

    raise typer.Exit(report.exit_code)
