"""``gpufabric store backup|restore``: a consistent copy of the store while replicas keep
writing (SQLite online backup; PostgreSQL ``pg_dump`` in one snapshot), and its restore into an
empty store (``--force`` to replace one that holds data), migrated to head on open."""

from __future__ import annotations

import os
from pathlib import Path

from gpufabric.cli.common import JSON_OPT, home
from gpufabric.cli.decl import Argument, Group, Option
from gpufabric.cli.output import console, emit_json

app = Group(no_args_is_help=True)


def _url() -> str:
    from gpufabric.store.db import resolve_url

    return resolve_url(os.environ.get("GPUFABRIC_DB") or None, home())


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {t}" for t, n in counts.items()) or "no data"


@app.command("backup")
def backup(
    path: Path = Argument(..., help="File to write (SQLite: a database file; PostgreSQL: pg_dump custom format)."),
    force: bool = Option(False, "--force", help="Replace PATH if it exists."),
    json_out: bool = JSON_OPT,
) -> None:
    """Copy the store to PATH, consistent while moves and API writes run (0600)."""
    from gpufabric.store.backup import backup as run

    out = run(_url(), path.absolute(), force).to_dict()
    if json_out:
        emit_json(out)
        return
    console.print(f"backup {out['path']} ({out['backend']}, revision {out['revision']}, {out['bytes']} bytes,"
                  f" {out['seconds']:.2f}s): {_counts(out['counts'])}", highlight=False, markup=False)


@app.command("restore")
def restore(
    path: Path = Argument(..., help="A backup made by `gpufabric store backup`."),
    force: bool = Option(False, "--force", help="Replace a store that holds data."),
    json_out: bool = JSON_OPT,
) -> None:
    """Restore the store from PATH (stop every `gpufabric serve` first), then migrate it to head."""
    from gpufabric.store.backup import restore as run

    out = run(_url(), path.absolute(), force).to_dict()
    if json_out:
        emit_json(out)
        return
    console.print(f"restored {out['store']} from {out['path']} (revision {out['backup_revision']} ->"
                  f" {out['revision']}, {out['seconds']:.2f}s): {_counts(out['counts'])}", highlight=False, markup=False)
