"""Store URLs for tests: a fresh SQLite file, or a fresh database in a private PostgreSQL.

The PostgreSQL 15 cluster (Debian package binaries) is started once per session in a
temp dir, run as the ``postgres`` user (root cannot run postgres), listening only on a
unix socket in that dir, with trust auth and fsync off; it is stopped and removed at
the end. If it cannot start, the tests that need it FAIL; they are never skipped.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

pytest_plugins = ["support.split_modules"]  # --splits/--group: whole modules per group (scripts/test.sh)

PG_BIN = Path(os.environ.get("GPUFABRIC_PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_PORT = 5432  # only names the socket file; the socket dir is private to this session
_db_numbers = itertools.count(1)


@dataclass(frozen=True)
class PgCluster:
    socket_dir: Path

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@/{database}?host={self.socket_dir}&port={PG_PORT}"

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(
            host=str(self.socket_dir), port=PG_PORT, user="postgres", dbname="postgres", autocommit=True
        )


def _as_postgres(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


def _run(args: list[str], what: str, log: Path | None = None) -> None:
    try:
        p = subprocess.run(_as_postgres(args), capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.fail(f"PostgreSQL {what} failed: {e}", pytrace=False)
    if p.returncode != 0:
        tail = log.read_text()[-2000:] if log is not None and log.exists() else ""
        pytest.fail(f"PostgreSQL {what} failed (exit {p.returncode}): {p.stderr.strip()}\n{tail}", pytrace=False)


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PgCluster]:
    root = Path(tempfile.mkdtemp(prefix="gpf-pg-"))
    data, log = root / "data", root / "postgres.log"
    started = False
    try:
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(root, pw.pw_uid, pw.pw_gid)
        _run([str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
              "--locale=C", "--no-sync"], "initdb")  # fmt: skip
        opts = f"-k {root} -p {PG_PORT} -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        started = True
        _run([str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60", "-o", opts, "start"],
             "start", log)  # fmt: skip
        yield PgCluster(root)
    finally:
        if started:
            subprocess.run(_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
                           capture_output=True, timeout=60, check=False)  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url(postgres_cluster: PgCluster) -> str:
    """URL of a database ``gpufabric_test`` in the session's PostgreSQL."""
    with postgres_cluster.admin() as c:
        c.execute("CREATE DATABASE gpufabric_test")
    return postgres_cluster.url("gpufabric_test")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty store: a fresh SQLite file or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'gpufabric.db'}"
        return
    cluster: PgCluster = request.getfixturevalue("postgres_cluster")
    name = f"t{os.getpid()}_{next(_db_numbers)}"
    with cluster.admin() as c:
        c.execute(f'CREATE DATABASE "{name}"')
    yield cluster.url(name)
    with cluster.admin() as c:
        c.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


FULL = os.environ.get("GPUFABRIC_TEST_FULL") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``@pytest.mark.full``: a longer variant of what ``make test`` already covers; it runs in
    ``make test-full`` (GPUFABRIC_TEST_FULL=1) only, keeping ``make test`` under its 40 minutes."""
    if FULL:
        return
    skip = pytest.mark.skip(reason="make test-full only (GPUFABRIC_TEST_FULL=1): a longer variant of a covered case")
    for item in items:
        if item.get_closest_marker("full") is not None:
            item.add_marker(skip)
