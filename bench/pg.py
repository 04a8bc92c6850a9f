"""A throwaway PostgreSQL 15 cluster for benchmarks (Debian binaries, run as the ``postgres``
user when root, unix socket in a private temp dir, trust auth), removed afterwards."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PG_BIN = Path(os.environ.get("GPUFABRIC_PG_BIN", "/usr/lib/postgresql/15/bin"))


def _as_postgres(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


@contextmanager
def postgres() -> Iterator[str]:
    """Yield the URL of database ``gpufabric_bench`` in a fresh cluster (fsync on: honest writes)."""
    root = Path(tempfile.mkdtemp(prefix="gf-bench-pg-"))
    data, log = root / "data", root / "postgres.log"
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(root, pw.pw_uid, pw.pw_gid)
    try:
        subprocess.run(_as_postgres([str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                                     "-E", "UTF8", "--locale=C"]), check=True, capture_output=True)
        opts = f"-k {root} -p 5432 -c listen_addresses=''"
        subprocess.run(_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60",
                                     "-o", opts, "start"]), check=True, capture_output=True)
        subprocess.run(_as_postgres([str(PG_BIN / "createdb"), "-h", str(root), "-p", "5432", "-U", "postgres",
                                     "gpufabric_bench"]), check=True, capture_output=True)
        yield f"postgresql+psycopg://postgres@/gpufabric_bench?host={root}&port=5432"
    finally:
        subprocess.run(_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
                       capture_output=True, timeout=60, check=False)
        shutil.rmtree(root, ignore_errors=True)
