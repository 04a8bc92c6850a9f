"""``gpufabric reconcile``: one pass (for cron) or a loop. ``serve`` lives in :mod:`serve_cmd`."""

from __future__ import annotations

import time

from gpufabric.cli.common import JSON_OPT, open_engine
from gpufabric.cli.decl import Option
from gpufabric.cli.output import console, emit_json, escape


def reconcile(
    once: bool = Option(True, "--once/--loop", help="One pass (default) or loop every --interval s."),
    policy: str = Option("repair", "--policy", help="repair: fix drift; report: only print it."),
    interval: float = Option(30.0, "--interval"),
    json_out: bool = JSON_OPT,
) -> None:
    """Compare desired (leases, moves) with the fabrics' real state; repair or report the drift."""
    from gpufabric.domain.errors import ValidationError
    from gpufabric.engine.reconcile import Policy, reconcile_once

    try:
        pol = Policy(policy)
    except ValueError:
        raise ValidationError("policy", policy, "repair or report") from None
    engine = open_engine()
    while True:
        result = reconcile_once(engine, pol)
        if json_out:
            emit_json(result.to_dict())
        else:
            console.print(
                f"reconcile ({pol.value}): {len(result.drift.lines())} drifted item(s)"
                f"{', repaired' if result.repaired else ''} in {result.seconds:.2f}s"
            )
            for line in result.drift.lines():
                console.print(f"  {escape(line)}")
            for line in result.rogue_sms:
                console.print(f"  rogue SM: {escape(line)}")
            if result.rogue_contained:
                console.print(f"  contained (switch port disabled): {escape(', '.join(result.rogue_contained))}")
        if once:
            return
        time.sleep(interval)

