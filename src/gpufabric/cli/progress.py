"""A rich progress display for long operations: one line per fabric/phase, updated live."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from gpufabric.cli.output import err_console, real_console

if TYPE_CHECKING:
    from rich.progress import TaskID


@contextmanager
def phase_progress(enabled: bool) -> Iterator[object]:
    """Yield a ``(phase, message)`` callback that drives a live display (or does nothing)."""
    if not enabled:
        yield lambda _phase, _msg: None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.fields[phase]:<11}"),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=real_console(err_console),
        transient=False,
    ) as prog:
        tasks: dict[str, TaskID] = {}

        def update(phase: str, msg: str) -> None:
            if phase not in tasks:
                tasks[phase] = prog.add_task(msg, phase=phase, total=None)
            prog.update(tasks[phase], description=msg)

        yield update
