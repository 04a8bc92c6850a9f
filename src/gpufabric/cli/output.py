"""Output helpers shared by every command: rich tables for people, JSON for machines."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from gpufabric.domain.errors import GpufabricError
from gpufabric.domain.serial import jsonable

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["console", "emit_json", "escape", "fail", "jsonable", "table"]


class _LazyConsole:
    """A rich Console made on first use: ``--json`` output never imports rich (bench/bench_cli.py)."""

    def __init__(self, stderr: bool = False) -> None:
        self._stderr = stderr
        self._real: Console | None = None

    def real(self) -> Console:
        if self._real is None:
            from rich.console import Console

            self._real = Console(stderr=self._stderr)
        return self._real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real(), name)


def real_console(c: Console) -> Console:
    """The rich Console behind ``console``/``err_console`` (for rich objects that take one)."""
    return c.real() if isinstance(c, _LazyConsole) else c


console: Console = _LazyConsole()  # type: ignore[assignment]
err_console: Console = _LazyConsole(stderr=True)  # type: ignore[assignment]


def escape(x: object) -> str:
    """User text (names, descriptions, error values) made inert for rich markup: ``[/x]`` prints as is."""
    from rich.markup import escape as rich_escape

    return rich_escape(str(x))


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    from rich.table import Table

    t = Table(title=escape(title))
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*[escape(x) for x in r])
    console.print(t)


def fail(e: GpufabricError, json_mode: bool) -> NoReturn:
    if json_mode:
        emit_json(e.to_json())
    else:
        err_console.print(f"[bold red]error:[/] {escape(e.message)}", highlight=False, soft_wrap=True)
    raise SystemExit(2)
