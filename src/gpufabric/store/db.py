"""Engine, URL resolution and schema migration of the store.

Owns how gpufabric talks to its database: which URL is used (argument, then
``$GPUFABRIC_DB``, then SQLite under ``$GPUFABRIC_HOME`` or ``./.gpufabric``), how
connections are set up per backend, and the programmatic ``alembic upgrade head``.

SQLite: every transaction is ``BEGIN IMMEDIATE`` (writers serialise up front instead
of failing on lock upgrade) and foreign keys are on; file databases are in WAL mode
with ``synchronous=FULL`` (each commit fsyncs the log), except a transaction begun
while :data:`RELAXED` is set (``Store.tx(durable=False)``: a move's claim, its progress
reports), committed with ``synchronous=NORMAL``: it survives a crash of the process (the
log is written), and an OS crash or power loss only if a durable commit came after it —
the next durable commit's fsync covers the whole log before it, so what was relaxed is on
disk before anything that follows it is (a claim before the quarantine phase's commit that
precedes any fabric change). PostgreSQL (psycopg 3): plain READ COMMITTED, every commit
durable; concurrent migrations are serialised with an advisory lock.
"""

from __future__ import annotations

import os
import re
import sqlite3
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from gpufabric.domain.errors import ConfigError

if TYPE_CHECKING:
    from alembic.config import Config

HEAD_REVISION: Final = "0019"
"""The newest migration; a store already there opens without loading alembic (a test keeps it true)."""

MIGRATIONS: Final = Path(__file__).parent / "migrations"
_MIGRATION_LOCK: Final = 0x6770_6661  # "gpfa": pg_advisory_xact_lock key
SQLITE_BUSY_TIMEOUT_S: Final = 30.0
RELAXED: ContextVar[bool] = ContextVar("gpufabric_store_relaxed", default=False)
"""Set while a transaction that need not be fsynced at its commit begins (SQLite; see module docstring)."""


_USERINFO_RE: Final = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:@/\s]*):(?P<pw>[^@\s]*)@", re.I)
_PASSWORD_KV_RE: Final = re.compile(r"(password\s*=\s*)('[^']*'|\S+)", re.I)


def redact(text: str) -> str:
    """``text`` with every URL password (``scheme://user:PASSWORD@host``) and libpq
    ``password=...`` replaced by ``***``: for every error and log message naming a store."""
    return _PASSWORD_KV_RE.sub(r"\1***", _USERINFO_RE.sub(r"\g<scheme>\g<user>:***@", text))


def store_error(e: BaseException, url: str) -> ConfigError:
    """A one-line error for a store that cannot be reached or used (no password, no traceback)."""
    detail = str(getattr(e, "orig", None) or e).strip().splitlines()
    reason = redact(detail[0] if detail else type(e).__name__)
    return ConfigError("db", redact(url), "a reachable database (check --db / $GPUFABRIC_DB)", reason)


def secure_home(path: Path) -> Path:
    """Create the state directory owner-only (0700); an existing one is left as the operator made it."""
    if not path.exists():
        path.mkdir(mode=0o700, parents=True)
        path.chmod(0o700)  # mkdir's mode is masked by the umask
    return path


def _secure_sqlite_file(path: Path) -> None:
    """The SQLite file holds every tenant's leases: owner read/write only (0600)."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.close(fd)
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)


def default_home() -> Path:
    return Path(os.environ.get("GPUFABRIC_HOME") or ".gpufabric")


def resolve_url(url: str | None = None, home: Path | None = None) -> str:
    """The store URL: ``url`` if given, else ``$GPUFABRIC_DB``, else SQLite in ``home``."""
    if url:
        return url
    env = os.environ.get("GPUFABRIC_DB")
    if env:
        return env
    base = home if home is not None else default_home()
    return f"sqlite:///{(base / 'gpufabric.db').absolute()}"


def make_engine(url: str) -> Engine:
    """Create an engine set up for the backend of ``url``."""
    try:
        u = make_url(url)
    except Exception:  # sqlalchemy raises ArgumentError for malformed URLs
        raise ConfigError(
            "db", redact(url), "an SQLAlchemy URL, e.g. sqlite:///path or postgresql+psycopg://..."
        ) from None
    backend = u.get_backend_name()
    if backend == "sqlite":
        if u.database and u.database != ":memory:" and not u.database.startswith("file:"):
            db_path = Path(u.database)
            try:
                secure_home(db_path.parent)
                _secure_sqlite_file(db_path)
            except OSError as e:
                raise store_error(e, url) from None
            _wal(u.database)
        engine = create_engine(u, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
        _sqlite_immediate(engine)
        return engine
    if backend == "postgresql":
        if u.drivername == "postgresql":
            u = u.set(drivername="postgresql+psycopg")
        return create_engine(u, pool_pre_ping=True)
    raise ConfigError("db", redact(url), "a sqlite:// or postgresql+psycopg:// URL")


def _wal(path: str) -> None:
    """WAL mode (persistent in the file): readers and the one writer do not block each other."""
    raw = sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_S, isolation_level=None)
    try:
        raw.execute("PRAGMA journal_mode=WAL")
    finally:
        raw.close()


def _sqlite_immediate(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA foreign_keys=ON")
        # WAL: a commit is one fsync of the log instead of the rollback journal's several
        # (~10 ms -> ~2.6 ms here); synchronous=FULL keeps every commit durable.
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=FULL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        want = "NORMAL" if RELAXED.get() else "FULL"  # set outside a transaction (SQLite refuses it inside)
        if conn.info.get("synchronous", "FULL") != want:  # conn.info: the pooled connection's, kept across uses
            conn.exec_driver_sql(f"PRAGMA synchronous={want}")
            conn.info["synchronous"] = want
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _config() -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def head_revision() -> str:
    """The newest migration revision id (read from the migration scripts)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_config()).get_current_head()
    if head is None:
        raise ConfigError("migrations", str(MIGRATIONS), "at least one revision")
    return str(head)


def current_revision(engine: Engine) -> str | None:
    """The store's migration revision, or None for an empty database."""
    with engine.connect() as conn:
        if not engine.dialect.has_table(conn, "alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def upgrade(engine: Engine) -> None:
    """Run ``alembic upgrade head`` on ``engine`` in one transaction (skipped, without
    importing alembic, when the store is already at :data:`HEAD_REVISION`). A store that
    cannot be reached raises a one-line ConfigError naming the URL without its password."""
    try:
        if current_revision(engine) == HEAD_REVISION:
            return
    except (DBAPIError, SQLAlchemyError) as e:
        raise store_error(e, engine.url.render_as_string(hide_password=True)) from None
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")
        upgrade_to(conn, "head")


def upgrade_to(conn: Connection, revision: str) -> None:
    """``alembic upgrade <revision>`` on ``conn``, in the caller's transaction."""
    from alembic import command

    cfg = _config()
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, revision)
