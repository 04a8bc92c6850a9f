"""The CLI's fast path (cli/fast.py) reads every core command line exactly as typer does.

For each command of every core group, the same command lines go to the fast parser and to typer
(the command's own function behind a spy, so typer builds its parameters from the same
signature): required only, every option in its first name, every option as ``--name=value`` with
the flags' ``--no-`` forms and the list options twice. Where the fast path reads a line, its
keyword arguments equal typer's, value and type. Help, unknown options and missing arguments
are left to typer. A command through ``--api`` runs without typer (nor its pydantic coercion)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from gpufabric.cli import fast
from gpufabric.cli.decl import Group, typed
from gpufabric.cli.root import GROUPS, _global

from support.cli_probe import probe

SAMPLE: dict[Any, list[str]] = {str: ["s1", "s2"], int: ["7", "12"], float: ["0.5", "2.25"], Path: ["p/x", "q"]}
FAST_NEEDED = ("node list", "node show", "node move", "lease list", "move list", "tenant list", "network list",
               "audit")  # fmt: skip


def commands() -> list[tuple[str, Callable[..., Any]]]:
    out: list[tuple[str, Callable[..., Any]]] = []
    for name, (module, attr, text) in GROUPS.items():
        obj = getattr(import_module(f"gpufabric.cli.{module}"), attr)
        if text is None:
            out.append((name, obj))
        else:
            assert isinstance(obj, Group)
            out += [(f"{name} {c.name}", c.fn) for c in obj.commands]
    return out


ALL = commands()


def typer_reads(fn: Callable[..., Any], argv: list[str]) -> dict[str, Any] | None:
    """The keyword arguments typer calls ``fn`` with for ``argv`` (None: typer refuses the line)."""
    seen: dict[str, Any] = {}

    @functools.wraps(typed(fn))  # the signature typer reads (cli/decl.py), as the app gets it
    def spy(**kw: Any) -> None:
        seen.update(kw)

    app = typer.Typer()
    app.command("x")(spy)
    app.callback()(lambda: None)  # a group: "x" is a sub-command, as in the real app
    r = CliRunner().invoke(app, ["x", *argv])
    return seen if r.exit_code == 0 and seen else (None if r.exit_code else seen)


def lines(specs: list[fast.Spec]) -> list[list[str]]:
    """Command lines of the shapes the fast path reads, from the parameters' own names and types."""
    pos = [v for s in specs if s.kind in ("arg", "args") for v in SAMPLE[s.conv][: 2 if s.kind == "args" else 1]]
    required = [x for s in specs if s.kind in ("opt", "many") and s.required for x in (s.names[0], SAMPLE[s.conv][0])]
    every: list[str] = []
    eq: list[str] = []
    for s in specs:
        if s.kind == "flag":
            every.append(s.names[0])
            eq.append(s.off[0] if s.off else s.names[-1])
        elif s.kind in ("opt", "many"):
            every += [s.names[0], SAMPLE[s.conv][0]]
            eq += [f"{s.names[-1]}={v}" for v in (SAMPLE[s.conv] if s.kind == "many" else SAMPLE[s.conv][1:])]
    return [pos + required, every + pos, [*pos[:1], *eq, *pos[1:]]]


@pytest.mark.parametrize(("path", "fn"), ALL, ids=[p for p, _ in ALL])
def test_the_fast_path_reads_each_line_as_typer_does(path: str, fn: Callable[..., Any]) -> None:
    try:
        specs = fast.specs(fn)
    except fast.Decline:
        assert path not in FAST_NEEDED, f"{path} must take the fast path"
        return
    for argv in lines(specs):
        mine = fast.parse(fn, argv)
        theirs = typer_reads(fn, argv)
        assert theirs is not None, (path, argv)
        assert mine == theirs, (path, argv)
        assert {k: type(v) for k, v in mine.items()} == {k: type(v) for k, v in theirs.items()}, (path, argv)


@pytest.mark.parametrize(("path", "fn"), ALL, ids=[p for p, _ in ALL])
def test_help_bad_options_and_missing_arguments_are_left_to_typer(path: str, fn: Callable[..., Any]) -> None:
    try:
        specs = fast.specs(fn)
    except fast.Decline:
        return
    full = lines(specs)[1]
    for argv in (["--help"], [*full, "--help"]):
        with pytest.raises(fast.Decline):
            fast.parse(fn, argv)
        assert typer_reads(fn, argv) == {}, (path, argv)  # typer prints the help: the command does not run
    with pytest.raises(fast.Decline):
        fast.parse(fn, [*full, "--", "x"])  # what follows -- is typer's to read
    refused = [[*full, "--no-such-option"], [*full, "-h"]]  # -h: not typer's help
    refused += [[*full, f"{s.names[0]}=1"] for s in specs if s.kind == "flag"]  # a flag takes no value
    refused += [[*full, s.names[0], "seven"] for s in specs if s.kind in ("opt", "many") and s.conv in (int, float)]
    refused += [[*full, s.names[0]] for s in specs if s.kind in ("opt", "many")]  # the value is missing
    if any(s.required for s in specs):
        refused.append([])
    for argv in refused:
        with pytest.raises(fast.Decline):
            fast.parse(fn, argv)
        assert typer_reads(fn, argv) is None, (path, argv)  # typer refuses it too, and names why


def test_the_commands_an_operator_runs_most_take_the_fast_path() -> None:
    taken = {p for p, fn in ALL if _reads(fn)}
    assert set(FAST_NEEDED) <= taken
    assert len(taken) >= len(ALL) // 2, sorted({p for p, _ in ALL} - taken)


def _reads(fn: Callable[..., Any]) -> bool:
    try:
        fast.specs(fn)
    except fast.Decline:
        return False
    return True


@pytest.mark.parametrize(
    "argv",
    [["--api", "http://h:1", "--token", "t", "node", "list"], ["--db", "sqlite:///x.db", "--home", "h", "node", "list"],
     ["--api", "http://h:1", "--token-file", "f", "node", "show", "n1", "--json"]],
)  # fmt: skip
def test_global_options_are_read_as_typer_does(argv: list[str]) -> None:
    root, gkw, fn, kw = fast.resolve(GROUPS, argv)
    assert root is _global
    i = argv.index("node")
    assert gkw == typer_reads(_global, argv[:i])
    assert kw == typer_reads(fn, argv[i + 2 :])


@pytest.mark.parametrize("argv", [["--api"], ["--db=x", "node", "list"], ["node"], ["nosuch", "x"], ["--help"],
                                  ["node", "--help"], ["node", "list", "--help"]])  # fmt: skip
def test_lines_the_fast_path_leaves_to_typer(argv: list[str]) -> None:
    with pytest.raises(fast.Decline):
        fast.resolve(GROUPS, argv)


def test_a_command_through_the_api_runs_without_pydantic_and_help_still_comes_from_typer() -> None:
    code, modules, out = probe("--api", "http://127.0.0.1:9", "--token", "x", "node", "list", "--json")
    assert code == 2 and json.loads(out)["error"]["field"] == "api"
    assert not [m for m in modules if m in ("pydantic", "typer") or m.startswith(("pydantic.", "typer."))]  # decl.py
    code, modules, out = probe("node", "list", "--help")
    assert code == 0 and "--wide" in out and "pydantic" in modules  # the typer app, as before
    code, _, out = probe("--api", "http://127.0.0.1:9", "--token", "x", "node", "list", "--nope")
    assert code == 2 and "No such option: --nope" in out
