"""The ``gpufabric`` command: typer app, global options, one-line errors, ``--json``.

Sub-command groups live in sibling ``*_cmd`` modules and are attached here.
"""

from __future__ import annotations

import os
import sys
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpufabric.cli.decl import Option, typed
from gpufabric.domain.errors import ConfigError, GpufabricError

if TYPE_CHECKING:
    import typer

_HELP = "gpufabric: hand GPU servers between tenants, isolated on every fabric."


def _root() -> typer.Typer:
    import typer

    return typer.Typer(
        no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, help=_HELP
    )


def _global(
    db: str = Option("", "--db", help="SQLAlchemy URL of the store (default: SQLite under --home)."),
    home: Path = Option(None, "--home", help="State directory (default $GPUFABRIC_HOME or ./.gpufabric)."),
    api: str = Option("", "--api", help="Act through a running `gpufabric serve` at this URL ($GPUFABRIC_API)."),
    token: str = Option("", "--token", help="Bearer token for --api ($GPUFABRIC_TOKEN; shows in ps: "
                        "prefer --token-file)."),
    token_file: Path = Option(None, "--token-file", help="A file (mode 0600) holding the bearer token for "
                              "--api ($GPUFABRIC_TOKEN_FILE)."),
) -> None:
    common = sys.modules.get("gpufabric.cli.common")  # loaded only by commands that use the store
    if common is not None:
        common.close_stores()  # one store per command (tests run several commands in one process)
    if api:
        os.environ["GPUFABRIC_API"] = api
    if token and token_file is not None:
        raise ConfigError("token", "--token and --token-file", "one of --token or --token-file")
    if token:
        os.environ["GPUFABRIC_TOKEN"] = token
        os.environ.pop("GPUFABRIC_TOKEN_FILE", None)
    if token_file is not None:
        os.environ["GPUFABRIC_TOKEN_FILE"] = str(token_file)
        os.environ.pop("GPUFABRIC_TOKEN", None)
    if db:
        os.environ["GPUFABRIC_DB"] = db
    if home is not None:
        os.environ["GPUFABRIC_HOME"] = str(home)


# name -> (module, attribute, help; a command function when help is None). Only the module of
# the command named on the command line is imported: `gpufabric --api URL node list` loads
# neither the store (SQLAlchemy) nor the fabric packages (bench/bench_cli.py measures it). The
# fabric kinds add their own groups (FabricKind.cli_group, cli/kinds.py): the kinds are loaded
# only for a command that is not one of these.
GROUPS: dict[str, tuple[str, str, str | None]] = {
    "inventory": ("inventory_cmd", "app", "Import the hardware inventory."),
    "node": ("node_cmd", "app", "Nodes: list, show, move."),
    "tenant": ("tenant_cmd", "tenant_app", "Tenants."),
    "network": ("tenant_cmd", "network_app", "Tenant networks (one segment per fabric)."),
    "offering": ("tenant_cmd", "offering_app", "Offerings (profiles a node is handed over in)."),
    "token": ("admin_cmd", "token_app", "API tokens (admin, owner, lessee), stored hashed."),
    "events": ("admin_cmd", "events", None),
    "lease": ("lease_cmd", "app", "Leases of nodes to tenants."),
    "move": ("move_cmd", "app", "Move intents: list, retry a failed one, cancel one not started or failed, "
             "resume after a crash."),
    "audit": ("audit_cmd", "audit", None),
    "reconcile": ("ops_cmd", "reconcile", None),
    "serve": ("serve_cmd", "serve", None),
    "store": ("store_cmd", "app", "Store backup and restore (SQLite online backup, PostgreSQL pg_dump)."),
    "site": ("site_cmd", "app", "Site preflight: check devices, SMs, pools, inventory, store before go-live."),
    "deploy": ("deploy_cmd", "app", "Site deployment: the shipped systemd unit."),
    "lab": ("lab_cmd", "app", "The local lab: ibsim + OpenSM + OVS + namespaces."),
}
_VALUED = ("--db", "--home", "--api", "--token", "--token-file")  # global options that take a value


def command_name(argv: list[str]) -> str | None:
    """The sub-command ``argv`` names (after the global options), or None (help)."""
    it = iter(argv)
    for a in it:
        if a in _VALUED:
            next(it, None)
        elif not a.startswith("-"):
            return a
    return None


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
