"""The ``gpufabric`` command: typer app, global options, one-line errors, ``--json``.

Sub-command groups live in sibling ``*_cmd`` modules and are attached here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from gpufabric.cli import (
    audit_cmd,
    inventory_cmd,
    lab_cmd,
    lease_cmd,
    move_cmd,
    node_cmd,
    offload_cmd,
    ops_cmd,
    tenant_cmd,
)
from gpufabric.cli.output import fail
from gpufabric.domain.errors import GpufabricError

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
) -> None:
    if db:
        os.environ["GPUFABRIC_DB"] = db
    if home is not None:
        os.environ["GPUFABRIC_HOME"] = str(home)


app.add_typer(inventory_cmd.app, name="inventory", help="Import the hardware inventory.")
app.add_typer(node_cmd.app, name="node", help="Nodes: list, show, move.")
app.add_typer(tenant_cmd.tenant_app, name="tenant", help="Tenants.")
app.add_typer(tenant_cmd.network_app, name="network", help="Tenant networks (one segment per fabric).")
app.add_typer(lease_cmd.app, name="lease", help="Leases of nodes to tenants.")
app.add_typer(move_cmd.app, name="move", help="Move intents: list, retry a failed one, resume after a crash.")
app.command("audit")(audit_cmd.audit)
app.command("reconcile")(ops_cmd.reconcile)
app.command("serve")(ops_cmd.serve)
app.add_typer(offload_cmd.app, name="offload", help="DPU offload report (hw / tc / datapath per tenant) and SR-IOV policy.")
app.add_typer(lab_cmd.app, name="lab", help="The local lab: ibsim + OpenSM + OVS + namespaces.")


def main() -> None:
    from sqlalchemy.exc import SQLAlchemyError

    try:
        app()
    except GpufabricError as e:
        fail(e, json_mode="--json" in sys.argv)
    except SQLAlchemyError as e:  # the store went away mid-command: one line, no password, no traceback
        from gpufabric.service.db import store_error

        fail(store_error(e, os.environ.get("GPUFABRIC_DB", "the store")), json_mode="--json" in sys.argv)
