"""``gpufabric store backup|restore``: a consistent copy of the store while replicas keep
writing (SQLite online backup; PostgreSQL ``pg_dump`` in one snapshot), and its restore into an
empty store (``--force`` to replace one that holds data), migrated to head on open. A restore checks
the backup's schema, lists the tokens it brings back and revokes them unless ``--keep-tokens``."""

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
    keep_tokens: bool = Option(False, "--keep-tokens", help="Keep the backup's live API tokens (default: revoked,"
                               " and listed: create new ones)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Restore the store from PATH (stop every `gpufabric serve` first), then migrate it to head.
    A backup whose schema is not the migrations' (an extra trigger, function, ...) is refused."""
    from gpufabric.store.backup import restore as run

    out = run(_url(), path.absolute(), force, keep_tokens).to_dict()
    if json_out:
        emit_json(out)
        return
    console.print(f"restored {out['store']} from {out['path']} (sha256 {out['sha256']}, revision"
                  f" {out['backup_revision']} -> {out['revision']}, {out['seconds']:.2f}s): {_counts(out['counts'])}",
                  highlight=False, markup=False, soft_wrap=True)  # fmt: skip
    toks = out["tokens"]
    if toks:
        names = "; ".join(f"{t['id']} {t['name']} ({t['role']}{'@' + t['tenant'] if t['tenant'] else ''})" for t in toks)
        verb = "kept" if keep_tokens else "revoked"
        console.print(f"{verb} {len(toks)} token(s) the backup holds: {names}", highlight=False, markup=False,
                      soft_wrap=True)  # fmt: skip
