"""Output helpers shared by every command: rich tables for people, JSON for machines."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

from rich.console import Console
from rich.markup import escape as _rich_escape
from rich.table import Table

from gpufabric.domain.errors import GpufabricError
from gpufabric.domain.serial import jsonable

__all__ = ["console", "emit_json", "escape", "fail", "jsonable", "table"]

console = Console()
err_console = Console(stderr=True)


def escape(x: object) -> str:
    """User text (names, descriptions, error values) made inert for rich markup: ``[/x]`` prints as is."""
    return _rich_escape(str(x))


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    t = Table(title=escape(title))
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*[escape(x) for x in r])
    console.print(t)


def fail(e: GpufabricError, json_mode: bool) -> NoReturn:
    if json_mode:
        emit_json(e.to_dict())
    else:
        err_console.print(f"[bold red]error:[/] {escape(e.message)}", highlight=False, soft_wrap=True)
    raise SystemExit(2)
