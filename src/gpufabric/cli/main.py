"""The ``gpufabric`` command: typer app, global options, one-line errors, ``--json``.

Sub-command groups live in sibling modules and are attached here.
"""

from __future__ import annotations

import sys

import typer

from gpufabric.cli.output import fail
from gpufabric.domain.errors import GpufabricError

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="gpufabric: isolate GPU servers per tenant on every fabric."
)


def main() -> None:
    try:
        app()
    except GpufabricError as e:
        fail(e, json_mode="--json" in sys.argv)
