"""The core commands' declarations, without typer: a command's parameters are ``Option`` and
``Argument`` defaults written as typer's (same arguments), recorded as plain values, and a
``Group`` records its commands by name. Importing them costs nothing: typer (with click and
its pydantic coercion, about a third of a command's start: bench/bench_cli.py) is imported only
by :func:`to_typer`, when the typer app is built (help, an error, a line the fast path leaves
to typer, a kind's group). The fast path (:mod:`gpufabric.cli.fast`) reads the same records.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import typer

F = TypeVar("F", bound=Callable[..., Any])


class Param:
    """``typer.Option(default, *decls, **settings)`` or ``typer.Argument(default, **settings)``, unbuilt.
    (Plain classes here: a dataclass imports inspect, a NamedTuple compiles one: ~1-5 ms of a start.)"""

    __slots__ = ("decls", "default", "kind", "settings")

    def __init__(self, kind: str, default: Any, decls: tuple[str, ...], settings: dict[str, Any]) -> None:
        self.kind, self.default, self.decls, self.settings = kind, default, decls, settings  # kind: option, argument

    def to_typer(self) -> Any:
        import typer

        if self.kind == "option":
            return typer.Option(self.default, *self.decls, **self.settings)
        return typer.Argument(self.default, *self.decls, **self.settings)


def Option(default: Any = ..., *decls: str, **settings: Any) -> Any:
    """An option as ``typer.Option`` declares it (typed ``Any``, as typer's, to stand as a default)."""
    return Param("option", default, decls, settings)


def Argument(default: Any = ..., *decls: str, **settings: Any) -> Any:
    """An argument as ``typer.Argument`` declares it."""
    return Param("argument", default, decls, settings)


class Command:
    __slots__ = ("fn", "name")

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        self.name, self.fn = name, fn  # name: as typer names it (given, else the function's with dashes)


class Group:
    """A command group as ``typer.Typer(**settings)`` with ``@group.command(name)`` commands."""

    def __init__(self, **settings: Any) -> None:
        self.settings = settings
        self.commands: list[Command] = []

    def command(self, name: str | None = None) -> Callable[[F], F]:
        def register(fn: F) -> F:
            self.commands.append(Command(name or fn.__name__.replace("_", "-"), fn))
            return fn

        return register

    def to_typer(self) -> typer.Typer:
        import typer

        app = typer.Typer(**self.settings)
        for c in self.commands:
            app.command(c.name)(typed(c.fn))
        return app


def typed(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as typer reads a command: the same function, name, help and annotations, its
    ``Param`` defaults made typer's ``OptionInfo``/``ArgumentInfo`` (a signature of its own)."""
    import inspect

    sig = inspect.signature(fn)
    params = [p.replace(default=p.default.to_typer()) if isinstance(p.default, Param) else p
              for p in sig.parameters.values()]  # fmt: skip

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    call.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    return call
