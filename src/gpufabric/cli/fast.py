"""The fast path of a core command: read ``argv`` from the command function's own declaration
(its ``Option``/``Argument`` defaults, :mod:`gpufabric.cli.decl`: the one source of its
options) and call the function, without importing typer or building its app. Typer 0.2x
imports click and pydantic and coerces every value through them: about half of a command's
start (bench/bench_cli.py).

It declines (``run`` returns False and ``main`` runs the typer app, which names the error or
prints the help) for anything outside the subset it reads exactly as typer does: help, an
unknown, repeated-short or malformed option, a value that starts with ``-``, a missing or extra
argument, a value typer would check or transform (min/max, exists, envvar, callbacks, prompts,
parsers, counts), a bool option whose flag would turn a true default off, and any type other
than ``str``/``int``/``float``/``bool``/``Path``/``list[str]`` and their optionals. A kind's
command group is never read here (the kinds load with typer). ``tests/unit/test_cli_fast.py``
holds it to typer's own reading of every core command.
"""

from __future__ import annotations

import gc
import sys
import types
import typing
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any

from gpufabric.cli.decl import Group, Param
from gpufabric.cli.root import _global

_SCALARS: dict[Any, Callable[[str], Any]] = {str: str, int: int, float: float, Path: Path}
# typer.Option/Argument settings that only shape help text: any other makes typer check or
# transform the value, so the fast path declines the command.
_HELP_ONLY = frozenset(
    ("help", "metavar", "show_default", "show_choices", "show_envvar", "hidden", "rich_help_panel",
     "autocompletion", "shell_complete", "case_sensitive", "allow_from_autoenv")
)  # fmt: skip
_EMPTY = object()  # a parameter without a default


class Decline(Exception):
    """The typer app reads this command line (help, an error, or a shape the fast path leaves to it)."""


class Spec:
    """One parameter of a command as typer reads it: names, kind of value, default."""

    def __init__(self, name: str, kind: str, conv: Callable[[str], Any], default: Any, required: bool,
                 names: tuple[str, ...] = (), off: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.name, self.kind, self.conv, self.default, self.required = name, kind, conv, default, required
        self.names, self.off = names, off  # option names; a bool's secondary (--no-x) names


def _type(hint: Any) -> tuple[Callable[[str], Any] | None, bool, bool]:
    """(converter or None for bool, multiple, optional) of a supported annotation; Decline otherwise."""
    optional = False
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) != 1:
            raise Decline(str(hint))
        hint, optional = args[0], True
    if typing.get_origin(hint) is list and typing.get_args(hint) == (str,):
        return str, True, optional
    if hint is bool:
        return None, False, optional
    if hint in _SCALARS:
        return _SCALARS[hint], False, optional
    raise Decline(str(hint))


def _parameters(fn: Callable[..., Any]) -> list[tuple[str, Any]]:
    """(name, default or _EMPTY) of ``fn``'s parameters, in order; Decline for ``*args``/``**kw``
    (read from its code object: ``inspect`` is not imported for this)."""
    code = fn.__code__
    if code.co_flags & 0x0C or code.co_posonlyargcount:  # CO_VARARGS | CO_VARKEYWORDS, or positional-only
        raise Decline(fn.__name__)
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    defaults = fn.__defaults__ or ()
    kwdefaults = fn.__kwdefaults__ or {}
    first = code.co_argcount - len(defaults)
    return [(n, defaults[i - first] if first <= i < code.co_argcount else kwdefaults.get(n, _EMPTY))
            for i, n in enumerate(names)]  # fmt: skip


def specs(fn: Callable[..., Any]) -> list[Spec]:
    """The parameters of ``fn`` as typer would make them; Decline for any the fast path does not read."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception as e:  # a name only imported for type checking: leave it to typer
        raise Decline(str(e)) from None
    out: list[Spec] = []
    for name, given in _parameters(fn):
        conv, multiple, _ = _type(hints.get(name))
        info = given if isinstance(given, Param) else None
        if info is not None and set(info.settings) - _HELP_ONLY:
            raise Decline(name)
        default = info.default if info is not None else given
        required = default is ... or default is _EMPTY
        if (info is not None and info.kind == "argument") or (info is None and given is _EMPTY):
            if conv is None or any(s.kind == "args" for s in out):
                raise Decline(name)  # a bool argument, or one after the list argument
            out.append(Spec(name, "args" if multiple else "arg", conv, None if required else default, required))
            continue
        dash = "--" + name.replace("_", "-")
        decls = info.decls if info is not None else ()
        if conv is None:  # a bool: a flag, with a secondary --no-x when typer makes one
            if required:
                raise Decline(name)
            on: list[str] = []
            off: list[str] = []
            for d in decls or (f"{dash}/--no-{dash[2:]}",):
                first, _, second = d.partition("/")
                on.append(first.strip())
                off.extend(x.strip() for x in second.split("/") if x.strip())
            if default and not off:
                raise Decline(name)  # click would make the flag turn the default off
            out.append(Spec(name, "flag", bool, bool(default), False, tuple(on), tuple(off)))
            continue
        names = tuple(d.strip() for d in decls if d.strip().startswith("-")) or (dash,)
        out.append(Spec(name, "many" if multiple else "opt", conv, default, required, names))
    return out


def parse(fn: Callable[..., Any], argv: list[str]) -> dict[str, Any]:
    """The keyword arguments typer would call ``fn`` with for ``argv``; Decline where typer reads it."""
    return _read(specs(fn), argv)


def _read(params: list[Spec], argv: list[str]) -> dict[str, Any]:
    by_name: dict[str, tuple[Spec, bool]] = {}
    for s in params:
        by_name.update({n: (s, True) for n in s.names})
        by_name.update({n: (s, False) for n in s.off})
    positional = [s for s in params if s.kind in ("arg", "args")]
    got: dict[str, Any] = {}
    rest = list(argv)
    pos: list[str] = []
    while rest:
        tok = rest.pop(0)
        if not tok.startswith("-"):
            pos.append(tok)
            continue
        name, eq, value = tok.partition("=") if tok.startswith("--") else (tok, "", "")
        if name not in by_name or tok in ("--", "-"):
            raise Decline(tok)  # --help, -h, an unknown option, --: typer's
        s, on = by_name[name]
        if s.kind == "flag":
            if eq:
                raise Decline(tok)
            got[s.name] = on
            continue
        if not eq:
            if not rest or rest[0].startswith("-"):
                raise Decline(tok)
            value = rest.pop(0)
        try:
            v = s.conv(value)
        except ValueError:
            raise Decline(tok) from None  # typer names the bad value
        if s.kind == "many":
            got.setdefault(s.name, []).append(v)
        else:
            got[s.name] = v
    try:
        for i, s in enumerate(positional):
            if s.kind == "args":  # the last one: every positional left, at least one when required
                if pos[i:]:
                    got[s.name] = [s.conv(raw) for raw in pos[i:]]
                pos = pos[:i]
                break
            if i < len(pos):
                got[s.name] = s.conv(pos[i])
    except ValueError:
        raise Decline("argument") from None  # typer names the bad value
    if len(pos) > len(positional):
        raise Decline("extra argument")
    for s in params:
        if s.name in got:
            continue
        if s.required:
            raise Decline(s.name)
        many = s.kind in ("many", "args") and s.default is not None
        got[s.name] = list(s.default) if many else s.default  # typer: a list default as a fresh list, None as None
    return got


def resolve(groups: dict[str, tuple[str, str, str | None]], argv: list[str]) -> tuple[Callable[..., Any], dict[str, Any], Callable[..., Any], dict[str, Any]]:  # fmt: skip
    """(root callback, its kwargs, command function, its kwargs) for ``argv``; Decline otherwise."""
    glob = specs(_global)
    names = {n: s for s in glob for n in s.names}
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] not in names or names[argv[i]].kind != "opt" or i + 1 >= len(argv):
            raise Decline(argv[i])
        i += 2
    if i >= len(argv) or argv[i] not in groups:
        raise Decline("no core command")
    gkw = _read(glob, argv[:i])
    module, attr, text = groups[argv[i]]
    obj: Any = getattr(import_module(f"gpufabric.cli.{module}"), attr)
    rest = argv[i + 1 :]
    if text is not None:  # a group: its command by name
        assert isinstance(obj, Group)
        cmd = next((c for c in obj.commands if rest and c.name == rest[0]), None)
        if cmd is None:
            raise Decline("help or an unknown command")
        obj, rest = cmd.fn, rest[1:]
    return _global, gkw, obj, parse(obj, rest)


def run(groups: dict[str, tuple[str, str, str | None]], argv: list[str]) -> bool:
    """Run ``argv`` on the fast path; False when it declines (nothing has run then)."""
    try:
        root, gkw, fn, kw = resolve(groups, argv)
    except Decline:
        return False
    # what is imported by now lives as long as the process: no collection scans it again, nor the
    # one at exit (about 5 ms of a command through --api)
    gc.freeze()
    try:  # what typer's standalone mode does with these (typer/core.py, _main)
        root(**gkw)
        fn(**kw)
    except KeyboardInterrupt:
        sys.exit(130)
    except EOFError:
        print("\nAborted!", file=sys.stderr)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(1)
    except Exception as e:
        if "typer" not in sys.modules:  # a command that raises typer's exceptions imports typer first
            raise
        _typer_exit(e)
        raise
    return True


def _typer_exit(e: Exception) -> None:
    """Exit as typer's standalone mode does for its own exceptions (``typer.Exit`` with its code, a
    click error shown, ``typer.Abort``); return for any other exception."""
    import typer
    from typer._click.exceptions import ClickException

    if isinstance(e, typer.Exit):
        sys.exit(e.exit_code)
    if isinstance(e, ClickException):
        e.show()
        sys.exit(e.exit_code)
    if isinstance(e, typer.Abort):
        print("Aborted!", file=sys.stderr)
        sys.exit(1)
