"""The root of the ``gpufabric`` command line, shared by the typer app (:mod:`gpufabric.cli.main`)
and the fast path (:mod:`gpufabric.cli.fast`): the global options (``_global``, the app's
callback) and the table of core commands (``GROUPS``), whose modules are imported by name."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from gpufabric.cli.decl import Option
from gpufabric.domain.errors import ConfigError


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
