"""The ``gpufabric`` command: typer app, one-line errors, ``--json``; a core command's line read
first by the fast path (:mod:`gpufabric.cli.fast`), the global options and the table of core
commands in :mod:`gpufabric.cli.root`.

Sub-command groups live in sibling ``*_cmd`` modules and are attached here.
"""

from __future__ import annotations

import os
import sys
from importlib import import_module
from typing import TYPE_CHECKING, Any

from gpufabric.cli.decl import typed
from gpufabric.cli.root import GROUPS, _global, command_name
from gpufabric.domain.errors import GpufabricError

if TYPE_CHECKING:
    import typer

_HELP = "gpufabric: hand GPU servers between tenants, isolated on every fabric."


def _root() -> typer.Typer:
    import typer

    return typer.Typer(
        no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, help=_HELP
    )


def build_app(only: str | None = None) -> typer.Typer:
    """The ``gpufabric`` app with every command, or only ``only`` (what a run needs)."""
    root = _root()
    root.callback()(typed(_global))
    kinds = None
    if only not in GROUPS:  # help, a kind's group or unknown: the kinds' groups too
        from gpufabric.cli.kinds import HOST, kind_groups

        kinds = kind_groups(only, core=GROUPS)  # a kind's group named like a core command: refused
        if only not in kinds:
            only = None  # unknown: the whole app (typer names the error and lists every command)
    for name, (module, attr, text) in GROUPS.items():
        if only is not None and name != only:
            continue
        obj: Any = getattr(import_module(f"gpufabric.cli.{module}"), attr)
        if text is None:
            root.command(name)(typed(obj))
        else:
            root.add_typer(obj.to_typer(), name=name, help=text)
    for name, group in (kinds or {}).items():
        if only is None or name == only:
            root.add_typer(group.build(HOST), name=name, help=group.help)
    return root


def __getattr__(name: str) -> Any:
    if name == "app":  # the whole app (tests drive it with typer's CliRunner)
        return build_app()
    raise AttributeError(name)


def main() -> None:
    argv = sys.argv[1:]
    try:
        from gpufabric.cli.fast import run

        if not run(GROUPS, argv):  # a core command read from its own signature, without the typer app
            build_app(command_name(argv))()
    except GpufabricError as e:
        from gpufabric.cli.output import fail

        fail(e, json_mode="--json" in sys.argv)
    except Exception as e:
        # SQLAlchemy is imported only by the commands that open the store (a command through
        # --api never does: 0.2 s of its start): a store error can only come from those
        sa = sys.modules.get("sqlalchemy.exc")
        if sa is None or not isinstance(e, sa.SQLAlchemyError):
            raise
        from gpufabric.cli.output import fail
        from gpufabric.store.db import store_error  # the store went away mid-command: one line, no password

        fail(store_error(e, os.environ.get("GPUFABRIC_DB", "the store")), json_mode="--json" in sys.argv)
