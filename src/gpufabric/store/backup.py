"""Backup and restore of the store (``gpufabric store backup|restore``).

Owns how a whole store is copied out and back in, consistently, while replicas keep writing:

- SQLite: the online backup API (:meth:`sqlite3.Connection.backup`) copies every page in one
  step, inside one read transaction: in WAL mode writers are not blocked and the copy is the
  store as of one commit. The copy is checked (``PRAGMA integrity_check``), made a single
  self-contained file (journal mode DELETE), 0600, and renamed into place.
- PostgreSQL: ``pg_dump --format=custom`` inside a snapshot exported by a REPEATABLE READ
  transaction (``pg_export_snapshot``), whose row counts are read in that same snapshot. The
  password never goes on a command line (``PGPASSWORD`` in the tools' environment).

A restore trusts a backup's rows, not its code (:mod:`gpufabric.store.restore_check`): its schema
must be exactly what the migrations make at its revision (an extra trigger, function, view, ... is
refused, naming it); a PostgreSQL dump's SQL is never run (the store is migrated to the dump's
revision and its rows are copied in, in one transaction: a refusal changes nothing). The tokens it
brings back are listed and revoked unless ``keep_tokens``; a ``store.restore`` event records who
restored which file (its sha256) and the tokens revoked or kept.

Restore refuses a store that holds any data (tenants, nodes, leases, moves, tokens, ...) unless
``force``; after the copy the store is opened, which migrates an older backup to head.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Connection, MetaData, create_engine, inspect, text
from sqlalchemy.engine import make_url

from gpufabric.domain.errors import ConfigError, ConflictError, NotFoundError, ValidationError
from gpufabric.store import db, restore_check, restore_review

DATA_TABLES: Final = ("tenants", "networks", "nodes", "leases", "moves", "tokens", "events")
"""Rows in any of these make a store non-empty (offerings and counters are seeded by every open)."""

SQLITE_MAGIC: Final = b"SQLite format 3\x00"
PGDUMP_MAGIC: Final = b"PGDMP"
PG_TOOL_TIMEOUT_S: Final = 3600.0


@dataclass(frozen=True)
class BackupReport:
    """What a backup wrote: the copy's schema revision and row counts are read from the copy itself
    (SQLite) or from the snapshot the dump was taken in (PostgreSQL)."""

    path: str
    backend: str
    revision: str | None
    counts: Mapping[str, int] = field(default_factory=dict)
    bytes: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "backend": self.backend, "revision": self.revision, "counts": dict(self.counts),
                "bytes": self.bytes, "seconds": round(self.seconds, 3)}  # fmt: skip


@dataclass(frozen=True)
class RestoreReport:
    """What a restore put in place: the backup's revision, the store's revision after the open
    that migrated it, and the row counts of the restored store (before the restore's own event)."""

    path: str
    backend: str
    store: str
    backup_revision: str | None
    revision: str | None
    counts: Mapping[str, int] = field(default_factory=dict)
    replaced: Mapping[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    sha256: str = ""
    tokens: tuple[Mapping[str, Any], ...] = ()
    """The tokens the backup brought back live (id, name, role, tenant, created_by, expires_at),
    each ``kept`` or revoked by the restore."""

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "backend": self.backend, "store": self.store, "sha256": self.sha256,
                "backup_revision": self.backup_revision, "revision": self.revision, "counts": dict(self.counts),
                "replaced": dict(self.replaced), "tokens": [dict(t) for t in self.tokens],
                "seconds": round(self.seconds, 3)}  # fmt: skip


# ---------------------------------------------------------------------------------------- shared
def _counts(conn: Connection) -> dict[str, int]:
    """Row counts of the data tables that exist at the store's revision (tokens came in 0004)."""
    names = set(inspect(conn).get_table_names())
    return {t: int(conn.execute(text(f'SELECT count(*) FROM "{t}"')).scalar() or 0) for t in DATA_TABLES if t in names}


def _revision(conn: Connection) -> str | None:
    if not conn.dialect.has_table(conn, "alembic_version"):
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def _target_file(path: Path, force: bool) -> Path:
    """The temp file a backup is written to before its rename to ``path`` (created 0600)."""
    if path.exists() and not force:
        raise ValidationError("path", str(path), "a path that does not exist yet (or --force to replace it)")
    if path.is_dir():
        raise ValidationError("path", str(path), "a file path, not a directory")
    if not path.parent.is_dir():
        raise ValidationError("path", str(path), "a path in an existing directory")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    return tmp


def _commit_file(tmp: Path, path: Path) -> int:
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return path.stat().st_size


def _magic(path: Path) -> bytes:
    if not path.is_file():
        raise NotFoundError("backup", str(path))
    with path.open("rb") as f:
        return f.read(len(SQLITE_MAGIC))


def _refuse_non_empty(store: str, counts: Mapping[str, int], force: bool) -> None:
    held = {t: n for t, n in counts.items() if n}
    if held and not force:
        what = ", ".join(f"{n} {t}" for t, n in held.items())
        raise ConflictError(f"store {db.redact(store)} is not empty ({what}): restore refuses to overwrite it;"
                            " allowed: an empty store, or --force to replace it", store=db.redact(store), **held)


def _backend(url: str) -> str:
    try:
        backend = make_url(url).get_backend_name()
    except Exception:  # sqlalchemy raises ArgumentError for malformed URLs
        backend = ""
    if backend not in ("sqlite", "postgresql"):
        raise ConfigError("db", db.redact(url), "a sqlite:// or postgresql+psycopg:// URL")
    return backend


# ---------------------------------------------------------------------------------------- SQLite
def _sqlite_path(url: str) -> Path:
    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        raise ConfigError("db", db.redact(url), "a SQLite file store (sqlite:///path) or a PostgreSQL URL")
    return Path(database)


@contextmanager
def _sqlite(path: Path, readonly: bool = False) -> Iterator[sqlite3.Connection]:
    uri = f"file:{path}?mode=ro" if readonly else f"file:{path}"
    conn = sqlite3.connect(uri, uri=True, timeout=db.SQLITE_BUSY_TIMEOUT_S, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


def _sqlite_facts(path: Path) -> tuple[str | None, dict[str, int]]:
    """Revision and counts of a SQLite file, read through SQLAlchemy (the same code as PostgreSQL)."""
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            return _revision(conn), _counts(conn)
    finally:
        engine.dispose()


def _backup_sqlite(url: str, path: Path, force: bool) -> BackupReport:
    src_path = _sqlite_path(url)
    if not src_path.is_file():
        raise NotFoundError("store", db.redact(url))
    t0 = time.monotonic()
    tmp = _target_file(path, force)
    try:
        with _sqlite(src_path) as src, _sqlite(tmp) as dst:
            src.backup(dst)  # pages=-1: every page in one step, one read transaction: one commit's state
            dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
            ok = dst.execute("PRAGMA integrity_check").fetchone()
            if ok is None or ok[0] != "ok":
                raise ConfigError("backup", str(path), "a copy that passes PRAGMA integrity_check", str(ok))
        revision, counts = _sqlite_facts(tmp)
        size = _commit_file(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return BackupReport(str(path), "sqlite", revision, counts, size, time.monotonic() - t0)


def _known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    return {r.revision for r in ScriptDirectory.from_config(db._config()).walk_revisions()}


def _check_revision(path: Path, revision: str | None) -> None:
    """A backup this release can migrate: one of its revisions (not a newer release's, not none)."""
    known = _known_revisions()
    if revision not in known:
        raise ValidationError("path", str(path), f"a backup of schema revision {', '.join(sorted(known))}",
                              f"its revision is {revision}")


def _restore_sqlite(url: str, path: Path, force: bool, keep_tokens: bool) -> RestoreReport:
    if _magic(path) != SQLITE_MAGIC:
        raise ValidationError("path", str(path), "a SQLite backup made by `gpufabric store backup` (this store is SQLite)")
    t0 = time.monotonic()
    with _sqlite(path, readonly=True) as chk:
        ok = chk.execute("PRAGMA integrity_check").fetchone()
    if ok is None or ok[0] != "ok":
        raise ValidationError("path", str(path), "a backup that passes PRAGMA integrity_check", str(ok))
    backup_revision, _ = _sqlite_facts(path)
    _check_revision(path, backup_revision)
    assert backup_revision is not None
    restore_check.check_sqlite(path, backup_revision)
    target = _sqlite_path(url)
    engine = db.make_engine(url)  # creates the home 0700 and the file 0600 when new
    try:
        with engine.connect() as conn:
            replaced = _counts(conn)
    finally:
        engine.dispose()
    _refuse_non_empty(url, replaced, force)
    with _sqlite(path, readonly=True) as src, _sqlite(target) as dst:
        src.backup(dst)
    return _reopen(url, path, "sqlite", backup_revision, replaced, t0, keep_tokens)


def _reopen(url: str, path: Path, backend: str, backup_revision: str | None, replaced: Mapping[str, int],
            t0: float, keep_tokens: bool) -> RestoreReport:  # fmt: skip
    """Open the restored store (migrating it to head), read what it holds (the backup's rows), then
    review its tokens and record the restore."""
    from gpufabric.store.core import Store

    sha = restore_review.sha256(path)
    with Store.open(url) as store:
        engine = db.make_engine(url)
        try:
            with engine.connect() as conn:  # the backup's rows: before the restore's own event
                revision, counts = _revision(conn), _counts(conn)
        finally:
            engine.dispose()
        tokens = restore_review.review(store, path, f"sha256 {sha}, revision {backup_revision}", keep_tokens)
    return RestoreReport(str(path), backend, db.redact(url), backup_revision, revision, counts, replaced,
                         time.monotonic() - t0, sha, tokens)  # fmt: skip


# ------------------------------------------------------------------------------------ PostgreSQL
def _pg_tool(name: str) -> str:
    base = os.environ.get("GPUFABRIC_PG_CLIENT_BIN")
    found = str(Path(base) / name) if base else shutil.which(name)
    if not found or not os.access(found, os.X_OK):
        raise ConfigError(name, "not found", "PostgreSQL client tools on PATH (apt install postgresql-client)"
                          " or in $GPUFABRIC_PG_CLIENT_BIN")
    return found


def _pg_conninfo(url: str) -> tuple[str, dict[str, str]]:
    """A libpq URI without the password for the tools' ``--dbname``, and their environment."""
    u = make_url(url)
    env = {**os.environ}
    if u.password:
        env["PGPASSWORD"] = str(u.password)
    uri = u.set(drivername="postgresql", password=None).render_as_string(hide_password=False)
    return uri, env


def _run_pg(args: list[str], env: dict[str, str], what: str) -> None:
    try:
        p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=PG_TOOL_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(what, Path(args[0]).name, "a PostgreSQL client tool that runs", str(e)) from None
    if p.returncode != 0:
        lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
        raise ConfigError(what, Path(args[0]).name, "a dump/restore that succeeds",
                          db.redact(lines[-1] if lines else f"exit {p.returncode}"))


def _backup_pg(url: str, path: Path, force: bool) -> BackupReport:
    pg_dump = _pg_tool("pg_dump")
    uri, env = _pg_conninfo(url)
    t0 = time.monotonic()
    tmp = _target_file(path, force)
    engine = db.make_engine(url)
    try:
        with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn, conn.begin():
            snapshot = conn.execute(text("SELECT pg_export_snapshot()")).scalar()
            revision, counts = _revision(conn), _counts(conn)
            _run_pg([pg_dump, "--format=custom", "--no-owner", "--no-privileges", f"--snapshot={snapshot}",
                     f"--file={tmp}", f"--dbname={uri}"], env, "pg_dump")  # fmt: skip
        size = _commit_file(tmp, path)
    finally:
        engine.dispose()
        tmp.unlink(missing_ok=True)
    return BackupReport(str(path), "postgresql", revision, counts, size, time.monotonic() - t0)


def _pg_dump_revision(pg_restore: str, path: Path, env: dict[str, str]) -> str | None:
    """The schema revision inside a custom-format dump (its ``alembic_version`` data, as SQL)."""
    try:
        p = subprocess.run([pg_restore, "--data-only", "--table=alembic_version", "--file=-", str(path)], env=env,
                           capture_output=True, text=True, timeout=PG_TOOL_TIMEOUT_S, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError("pg_restore", Path(pg_restore).name, "a PostgreSQL client tool that runs", str(e)) from None
    if p.returncode != 0:
        raise ValidationError("path", str(path), "a pg_dump custom-format backup", db.redact(p.stderr.strip()[-200:]))
    lines = p.stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("COPY ") and "alembic_version" in line and i + 1 < len(lines) and lines[i + 1] != "\\.":
            return lines[i + 1].strip()
    return None


def _drop_everything(conn: Connection) -> None:
    """Empty the target schema of gpufabric's objects: every table (CASCADE: its triggers) and the
    trigger functions (``gf_*``), so that the migrations meet nothing."""
    for t in inspect(conn).get_table_names():
        conn.exec_driver_sql(f'DROP TABLE IF EXISTS "{t}" CASCADE')
    funcs = conn.execute(text(
        "SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
        " WHERE n.nspname = current_schema() AND p.proname LIKE 'gf\\_%'"
    )).scalars().all()  # fmt: skip
    for f in funcs:
        conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {f} CASCADE")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _load(conn: Connection, blocks: Mapping[str, tuple[tuple[str, ...], list[str]]]) -> None:
    """The dump's rows into the migrated tables (their seeds replaced), parents first, through
    COPY statements written here; each table's id sequence then follows its rows."""
    md = MetaData()
    md.reflect(conn)
    order = [t.name for t in md.sorted_tables if t.name in blocks and t.name != "alembic_version"]
    if order:
        conn.exec_driver_sql(f"TRUNCATE {', '.join(_quote(t) for t in order)} CASCADE")
    raw: Any = conn.connection.driver_connection
    for t in order:
        cols, lines = blocks[t]
        with raw.cursor() as cur, cur.copy(f"COPY {_quote(t)} ({', '.join(map(_quote, cols))}) FROM STDIN") as cp:
            for line in lines:
                cp.write(line + "\n")
    for t in order:
        if "id" in blocks[t][0]:
            conn.execute(text(
                f"SELECT setval(seq, COALESCE((SELECT max(id) FROM {_quote(t)}), 1),"
                f" (SELECT max(id) FROM {_quote(t)}) IS NOT NULL)"
                " FROM (SELECT pg_get_serial_sequence(:t, 'id') AS seq) s WHERE seq IS NOT NULL"
            ), {"t": _quote(t)})  # fmt: skip


def _restore_pg(url: str, path: Path, force: bool, keep_tokens: bool) -> RestoreReport:
    if _magic(path)[: len(PGDUMP_MAGIC)] != PGDUMP_MAGIC:
        raise ValidationError("path", str(path), "a pg_dump custom-format backup (this store is PostgreSQL)")
    pg_restore = _pg_tool("pg_restore")
    _uri, env = _pg_conninfo(url)
    t0 = time.monotonic()
    backup_revision = _pg_dump_revision(pg_restore, path, env)
    _check_revision(path, backup_revision)
    assert backup_revision is not None
    engine = db.make_engine(url)
    try:
        with engine.begin() as conn:  # one transaction (DDL included): a refusal leaves the store as it was
            replaced = _counts(conn)
            _refuse_non_empty(url, replaced, force)
            _drop_everything(conn)
            db.upgrade_to(conn, backup_revision)
            catalog = restore_check.pg_catalog(conn)
            restore_check.check_toc(pg_restore, path, env, catalog, backup_revision)
            _load(conn, restore_check.data_blocks(pg_restore, path, env, catalog, backup_revision))
    finally:
        engine.dispose()
    return _reopen(url, path, "postgresql", backup_revision, replaced, t0, keep_tokens)


# ---------------------------------------------------------------------------------------- public
def backup(url: str, path: Path, force: bool = False) -> BackupReport:
    """Copy the store at ``url`` to ``path`` (refused if ``path`` exists, unless ``force``)."""
    return _backup_sqlite(url, path, force) if _backend(url) == "sqlite" else _backup_pg(url, path, force)


def restore(url: str, path: Path, force: bool = False, keep_tokens: bool = False) -> RestoreReport:
    """Replace the store at ``url`` by the backup at ``path`` once its schema is checked, then open
    it (migrating it to head), revoke the tokens it brought back unless ``keep_tokens`` and record
    the restore. A store holding any data is refused unless ``force``."""
    if _backend(url) == "sqlite":
        return _restore_sqlite(url, path, force, keep_tokens)
    return _restore_pg(url, path, force, keep_tokens)
