"""Which ``serve`` replica runs the store-wide loops (reconcile and the rogue-SM watch).

Every replica serves the API and runs the move worker (moves are claimed one by one, fenced
and taken over by heartbeat); the reconcile loop and the rogue-SM watch must run on one
replica at a time (two would repair the same drift twice, or contain the same SM twice). The
leader holds a lock for as long as it lives:

* PostgreSQL: a session-level advisory lock (``pg_try_advisory_lock``) on a connection of its
  own. The database releases it when that session ends: at once when the process dies (its
  socket closes), after the TCP keepalive timeout when its host vanishes (set
  ``tcp_keepalives_idle`` / ``_interval`` / ``_count`` on the server to bound it).
* SQLite: a non-blocking ``flock`` on ``<db>.loops-lock`` (one host: the lock dies with the
  process).

Standbys try again every ``serve`` heartbeat (``try_lead``), so a leader that dies is replaced
within one heartbeat interval of the database noticing.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO, Any, Final

from gpufabric.store.core import Store

LOOPS_LOCK_KEY: Final = 0x6770_6663  # pg advisory lock key, next to the fabric lock's


class LoopLeader:
    """``try_lead()`` -> True while this replica leads (non-blocking); ``release()`` at exit."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._conn: Any = None
        self._file: IO[str] | None = None
        self.held = False

    def try_lead(self) -> bool:
        engine = self.store.engine
        if engine.dialect.name == "postgresql":
            self.held = self._pg(engine)
        else:
            database = engine.url.database
            self.held = True if not database or database == ":memory:" else self._flock(Path(database + ".loops-lock"))
        return self.held

    def _pg(self, engine: Any) -> bool:
        if self._conn is not None:
            try:  # still ours? (a database restart ends the session and with it the lock)
                n = self._conn.exec_driver_sql(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s"
                    " AND pid = pg_backend_pid() AND granted" % (LOOPS_LOCK_KEY & 0xFFFFFFFF)
                ).scalar()
                self._conn.commit()
                if n:
                    return True
            except Exception:
                pass
            self._drop_conn()
        try:
            conn = engine.connect()
        except Exception:
            return False
        try:
            got = bool(conn.exec_driver_sql(f"SELECT pg_try_advisory_lock({LOOPS_LOCK_KEY})").scalar())
            conn.commit()
        except Exception:
            conn.invalidate()
            return False
        if got:
            self._conn = conn
        else:
            conn.close()
        return got

    def _flock(self, path: Path) -> bool:
        if self._file is not None:
            return True
        f = path.open("a")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            return False
        f.write(f"{os.getpid()}\n")
        f.flush()
        self._file = f
        return True

    def _drop_conn(self) -> None:
        conn, self._conn = self._conn, None
        try:
            conn.invalidate()
        except Exception:
            pass

    def release(self) -> None:
        if self._conn is not None:
            try:
                self._conn.exec_driver_sql(f"SELECT pg_advisory_unlock({LOOPS_LOCK_KEY})")
                self._conn.commit()
                self._conn.close()
            except Exception:
                self._drop_conn()
            self._conn = None
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None
        self.held = False
