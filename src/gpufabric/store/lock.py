"""The fabric lock and the fabric epoch.

The lock serialises desired-state computation + apply + verify across workers (replicas): a
PostgreSQL advisory lock (held on its own connection, checked before each phase is recorded:
a database restart that drops it aborts the phase), or a file lock beside an SQLite database.
A crashed holder releases it (its session or file descriptor dies with it). On PostgreSQL the
holder's session (its backend PID, :attr:`FabricLock.session`) is recorded on the moves it runs,
and :func:`lock_holders` says which session holds the lock now: a running move whose recorded
session holds it no longer has a worker PostgreSQL saw go away (``kill -9``, a host whose TCP
connection ended), which a watcher takes over after one missed heartbeat (store/liveness.py).

The epoch (one row) is bumped by every worker after it applied to the fabrics, under the lock:
a warm worker may reuse its own last verified read-back only while the epoch is still the one
it wrote; otherwise another writer changed the fabrics and it reads them again.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from sqlalchemy import text, update
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from gpufabric.domain.errors import GpufabricError
from gpufabric.store.core import Store
from gpufabric.store.tables import FabricEpochRow
from gpufabric.store.tx import Tx

FABRIC_LOCK_KEY: Final = 0x6770_6662  # pg_advisory_lock key of the fabric-apply lock


class LockLostError(GpufabricError):
    """The fabric lock was lost while a phase ran (e.g. PostgreSQL restarted)."""


class FabricLock:
    """``with lock.held(): ... lock.check()``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._conn: Any = None
        self.session: int | None = None  # PostgreSQL: the backend PID holding the lock (while held)

    @contextmanager
    def held(self) -> Iterator[None]:
        engine = self.store.engine
        if engine.dialect.name == "postgresql":
            with engine.connect() as conn:
                pid = conn.exec_driver_sql(f"SELECT pg_backend_pid() FROM pg_advisory_lock({FABRIC_LOCK_KEY})").scalar()
                conn.commit()
                self._conn, self.session = conn, None if pid is None else int(pid)
                try:
                    yield
                finally:
                    self._conn = self.session = None
                    try:
                        conn.exec_driver_sql(f"SELECT pg_advisory_unlock({FABRIC_LOCK_KEY})")
                        conn.commit()
                    except Exception:
                        conn.invalidate()
            return
        database = engine.url.database
        if not database or database == ":memory:":
            yield
            return
        with Path(database + ".fabric-lock").open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def check(self) -> None:
        """Raise LockLostError when the PostgreSQL advisory lock is no longer held by us."""
        conn = self._conn
        if conn is None:
            return
        try:
            held = self.session in lock_holders(conn)
            conn.commit()
        except Exception as e:
            raise LockLostError(f"fabric lock lost: {type(e).__name__}: {e}") from None
        if not held:
            raise LockLostError("fabric lock lost (the database no longer shows our advisory lock)")


def lock_holders(s: Session | Connection) -> set[int]:
    """The backend PIDs holding the fabric lock now (PostgreSQL; at most one: it is exclusive)."""
    q = text(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = 0"
        " AND objid = CAST(:objid AS oid) AND objsubid = 1"
    )
    return {int(p) for p in s.execute(q, {"objid": FABRIC_LOCK_KEY & 0xFFFFFFFF}).scalars() if p is not None}


def read_epoch(store: Store) -> tuple[int, str]:
    with store.tx() as tx:
        s = tx.session
        row = s.get(FabricEpochRow, 1)
        return (row.epoch, row.writer) if row is not None else (0, "")


def bump_epoch(store: Store, writer: str) -> tuple[int, str]:
    with store.tx() as tx:
        return bump_in(tx, writer)


def bump_in(tx: Tx, writer: str) -> tuple[int, str]:
    """Bump the epoch inside the caller's transaction ``tx`` (one atomic UPDATE)."""
    s = tx.session
    q = (
        update(FabricEpochRow)
        .where(FabricEpochRow.id == 1)
        .values(epoch=FabricEpochRow.epoch + 1, writer=writer)
        .returning(FabricEpochRow.epoch)
    )
    n = s.execute(q).scalar()
    if n is None:
        s.add(FabricEpochRow(id=1, epoch=1, writer=writer))
        s.flush()
        n = 1
    return int(n), writer
