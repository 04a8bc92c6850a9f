"""The ``gpufabric`` command: typer app, global options, one-line errors, ``--json``.

Sub-command groups live in sibling ``*_cmd`` modules and are attached here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from gpufabric.cli import (
    admin_cmd,
    audit_cmd,
    deploy_cmd,
    inventory_cmd,
    lab_cmd,
    lease_cmd,
    move_cmd,
    node_cmd,
    offload_cmd,
    ops_cmd,
    serve_cmd,
    site_cmd,
    store_cmd,
    tenant_cmd,
)
from gpufabric.cli.common import close_stores
from gpufabric.cli.output import fail
from gpufabric.domain.errors import ConfigError, GpufabricError

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="gpufabric: hand GPU servers between tenants, isolated on every fabric.",
)


@app.callback()
def _global(
    db: str = typer.Option("", "--db", help="SQLAlchemy URL of the store (default: SQLite under --home)."),
    home: Path = typer.Option(None, "--home", help="State directory (default $GPUFABRIC_HOME or ./.gpufabric)."),
    api: str = typer.Option("", "--api", help="Act through a running `gpufabric serve` at this URL ($GPUFABRIC_API)."),
    token: str = typer.Option("", "--token", help="Bearer token for --api ($GPUFABRIC_TOKEN; shows in ps: "
                              "prefer --token-file)."),
    token_file: Path = typer.Option(None, "--token-file", help="A file (mode 0600) holding the bearer token for "
                                    "--api ($GPUFABRIC_TOKEN_FILE)."),
) -> None:
    close_stores()  # one store per command (tests run several commands in one process)
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


app.add_typer(inventory_cmd.app, name="inventory", help="Import the hardware inventory.")
app.add_typer(node_cmd.app, name="node", help="Nodes: list, show, move.")
app.add_typer(tenant_cmd.tenant_app, name="tenant", help="Tenants.")
app.add_typer(tenant_cmd.network_app, name="network", help="Tenant networks (one segment per fabric).")
app.add_typer(tenant_cmd.offering_app, name="offering", help="Offerings (profiles a node is handed over in).")
app.add_typer(admin_cmd.token_app, name="token", help="API tokens (admin, owner, lessee), stored hashed.")
app.command("events")(admin_cmd.events)
app.add_typer(lease_cmd.app, name="lease", help="Leases of nodes to tenants.")
app.add_typer(move_cmd.app, name="move", help="Move intents: list, retry a failed one, cancel one not started or failed, resume after a crash.")
app.command("audit")(audit_cmd.audit)
app.command("reconcile")(ops_cmd.reconcile)
app.command("serve")(serve_cmd.serve)
app.add_typer(offload_cmd.app, name="offload", help="DPU offload report (hw / tc / datapath per tenant) and SR-IOV policy.")
app.add_typer(store_cmd.app, name="store", help="Store backup and restore (SQLite online backup, PostgreSQL pg_dump).")
app.add_typer(site_cmd.app, name="site", help="Site preflight: check devices, SMs, pools, inventory, store before go-live.")
app.add_typer(deploy_cmd.app, name="deploy", help="Site deployment: the shipped systemd unit.")
app.add_typer(lab_cmd.app, name="lab", help="The local lab: ibsim + OpenSM + OVS + namespaces.")


def main() -> None:
    try:
        app()
    except GpufabricError as e:
        fail(e, json_mode="--json" in sys.argv)
    except Exception as e:
        # SQLAlchemy is imported only by the commands that open the store (a command through
        # --api never does: 0.2 s of its start): a store error can only come from those
        sa = sys.modules.get("sqlalchemy.exc")
        if sa is None or not isinstance(e, sa.SQLAlchemyError):
            raise
        from gpufabric.service.db import store_error  # the store went away mid-command: one line, no password

        fail(store_error(e, os.environ.get("GPUFABRIC_DB", "the store")), json_mode="--json" in sys.argv)
