"""Output helpers shared by every command: rich tables for people, JSON for machines."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from gpufabric.domain.errors import GpufabricError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["compact", "console", "emit_json", "escape", "fail", "node_table", "table"]


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


def sized_console(width: int) -> Console:
    """A console of ``width`` columns on stdout (the node table sizes itself)."""
    from rich.console import Console

    return Console(width=width)


ELLIPSIS = "\u2026"
GAP = 2  # characters between two columns of the node table


def compact(cell: str, width: int) -> str:
    """A multi-line cell in one line of at most ``width`` characters: its first line, then
    ``+N`` for the N lines left out. Whole words are kept; the first word that does not fit
    keeps the end of each of its ``/`` parts (the distinctive part of a switch, a port or a
    GUID) after an ellipsis, e.g. ``…af01/…01p0`` or ``mlx5_0/1… +1``. Never wraps, never cuts
    the ``+N``; ``node list --wide`` shows every line in full."""
    lines = [ln for ln in cell.splitlines() if ln.strip()]
    if not lines:
        return "-"
    more = f" +{len(lines) - 1}" if len(lines) > 1 else ""
    room = max(width - len(more), 1)
    out = ""
    for word in lines[0].split():
        sep = " " if out else ""
        if len(out) + len(sep) + len(word) <= room:
            out += sep + word
            continue
        left = room - len(out) - len(sep)
        short = _tails(word, left) if left >= 4 else ""
        out += (sep + short) if short else ELLIPSIS
        break
    return out[:room] + more


def _tails(word: str, width: int) -> str:
    """``word`` in ``width`` characters: each ``/`` part that is too long keeps its end after ``…``."""
    parts = word.split("/")
    budget = (width - (len(parts) - 1)) // len(parts)
    if budget < 3:
        return ELLIPSIS + word[-(width - 1):]
    return "/".join(p if len(p) <= budget else ELLIPSIS + p[-(budget - 1):] for p in parts)


def _fit(needs: list[int], room: int) -> list[int]:
    """Column widths for ``needs`` within ``room`` (water-filling: small columns get all they need)."""
    widths = [0] * len(needs)
    todo = sorted(range(len(needs)), key=lambda i: needs[i])
    for n, i in enumerate(todo):
        share = max(room // (len(todo) - n), 1)
        widths[i] = needs[i] if needs[i] * 4 <= share * 5 else share  # a cell a bit over its share stays whole
        room -= widths[i]
    return widths


def node_table(nodes: Sequence[dict[str, Any]], wide: bool = False, width: int | None = None) -> None:
    """The node table: node, tenant, state, then one column per fabric from each node's
    ``fabrics.<name>.summary`` (the cells of :func:`gpufabric.engine.columns.fabric_cells`).
    It fits ``width`` (the terminal's, 80 when not a terminal) with each fabric cell on one
    line; ``wide``: the offering too and every line of every cell in full, on one line each."""
    from rich import box
    from rich.table import Table

    columns: list[str] = []
    for n in nodes:
        columns += [c for c in n.get("fabrics", {}) if c not in columns]
    head = ["node", "tenant", "state"] + (["offering", "owner"] if wide else [])
    rows = [[n["name"], n["tenant"], n["state"]] + ([n.get("offering") or "-", n.get("owner") or "-"] if wide else [])
            for n in nodes]  # fmt: skip
    cells = [[str(n.get("fabrics", {}).get(c, {}).get("summary") or "") for c in columns] for n in nodes]
    t = Table(title=escape(f"{len(nodes)} nodes"), box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
              collapse_padding=True)
    fixed = [max([len(h)] + [len(str(r[i])) for r in rows]) for i, h in enumerate(head)]
    for h, w in zip(head, fixed, strict=True):
        t.add_column(h, no_wrap=True, min_width=w)
    if wide:
        for c in columns:
            t.add_column(c, no_wrap=True)
        for r, cs in zip(rows, cells, strict=True):
            t.add_row(*[escape(x) for x in r], *[escape(x or "-") for x in cs])
        need = sum(fixed) + GAP * len(head) + sum(GAP + max([len(c)] + [len(ln) for cs in cells for ln in cs[i].splitlines()])
                                                 for i, c in enumerate(columns))  # fmt: skip
        sized_console(max(need, width or console.width)).print(t)
        return
    total = width or console.width
    room = total - sum(fixed) - GAP * (len(head) + len(columns) - 1)
    needs = [max([len(c)] + [len(compact(cs[i], 10_000)) for cs in cells]) for i, c in enumerate(columns)]
    widths = _fit(needs, room)
    for c, w in zip(columns, widths, strict=True):
        t.add_column(c[:w] if len(c) > w else c, no_wrap=True, width=w, overflow="crop")
    for r, cs in zip(rows, cells, strict=True):
        t.add_row(*[escape(x) for x in r], *[escape(compact(x, w)) for x, w in zip(cs, widths, strict=True)])
    sized_console(total).print(t)


def fail(e: GpufabricError, json_mode: bool) -> NoReturn:
    if json_mode:
        emit_json(e.to_json())
    else:
        err_console.print(f"[bold red]error:[/] {escape(e.message)}", highlight=False, soft_wrap=True)
    raise SystemExit(2)
