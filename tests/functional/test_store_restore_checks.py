"""``gpufabric store restore`` trusts nothing a backup adds (issue 31, item 7), SQLite and PostgreSQL.

- A backup whose schema holds an object the migrations at its revision do not make (a trigger that
  deletes its own event rows, a function) is refused, naming it; nothing is written, and on
  PostgreSQL none of the dump's SQL runs.
- The tokens a backup brings back are listed (id, name, role, tenant) and revoked, unless the
  operator keeps them (``--keep-tokens``): a token planted in a backup does not authenticate.
- A restore writes an event: who, from which file, its sha256, and what it revoked.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.errors import UnauthorizedError
from gpufabric.store import db
from gpufabric.store.auth import EventLog, Tokens
from gpufabric.store.backup import backup
from gpufabric.store.core import Store

GF = str(Path(sys.executable).parent / "gpufabric")
HIDE_SQLITE = ("CREATE TRIGGER gf_hide AFTER INSERT ON events WHEN NEW.actor = 'mallory'"
               " BEGIN DELETE FROM events WHERE id = NEW.id; END")  # fmt: skip
HIDE_PG = (
    "CREATE FUNCTION gf_hide() RETURNS trigger LANGUAGE plpgsql AS"
    " $$BEGIN IF NEW.actor = 'mallory' THEN DELETE FROM events WHERE id = NEW.id; END IF; RETURN NULL; END$$;"
    " CREATE TRIGGER gf_hide AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION gf_hide()"
)


def _env(url: str, tmp_path: Path) -> dict[str, str]:
    if url.startswith("sqlite"):
        return {**os.environ, "GPUFABRIC_DB": "", "GPUFABRIC_HOME": str(Path(url.removeprefix("sqlite:///")).parent)}
    return {**os.environ, "GPUFABRIC_DB": url, "GPUFABRIC_HOME": str(tmp_path / "unused-home")}


def _gf(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GF, *args], env=env, capture_output=True, text=True, timeout=300, check=False)


def _execute(url: str, sql: str) -> None:
    engine = db.make_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(sql)
    finally:
        engine.dispose()


def _scalar(url: str, sql: str) -> object:
    engine = db.make_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(text(sql)).scalar()
    finally:
        engine.dispose()


def _source(url: str) -> str:
    """A store with a tenant and an admin token; the token's secret."""
    with Store.open(url) as s:
        s.create_tenant("alpha")
        return Tokens(s).create("planted", "admin", None, LOCAL_ADMIN)[1]


def _plant_trigger(url: str, bak: Path) -> None:
    """The trigger, put where an attacker holding the backup (SQLite) or the database (PostgreSQL) puts it."""
    if url.startswith("sqlite"):
        with sqlite3.connect(bak) as c:
            c.execute(HIDE_SQLITE)
        return
    _execute(url, HIDE_PG)
    backup(url, bak, force=True)


def test_a_backup_with_a_trigger_of_its_own_is_refused_naming_it(
    store_url: str, fresh_url: str, tmp_path: Path
) -> None:
    _source(store_url)
    bak = tmp_path / "s.bak"
    backup(store_url, bak)
    _plant_trigger(store_url, bak)
    env = _env(fresh_url, tmp_path)
    p = _gf(env, "store", "restore", str(bak), "--force")
    assert p.returncode == 2, p.stdout + p.stderr
    named = "trigger gf_hide, which no migration makes" if fresh_url.startswith("sqlite") else (
        "function public.gf_hide(), trigger public.events gf_hide, which no migration makes")
    assert named in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    with Store.open(fresh_url) as s:  # nothing of the backup came in
        assert s.tenants() == []
    if not fresh_url.startswith("sqlite"):
        assert _scalar(fresh_url, "SELECT count(*) FROM pg_proc WHERE proname = 'gf_hide'") == 0
        assert _scalar(fresh_url, "SELECT count(*) FROM pg_trigger WHERE tgname = 'gf_hide'") == 0


def test_a_dumps_own_function_is_refused_and_never_runs(store_url: str, fresh_url: str, tmp_path: Path) -> None:
    if store_url.startswith("sqlite"):
        pytest.skip("a PostgreSQL dump's SQL: SQLite backups hold no SQL to run")  # the trigger test covers SQLite
    _source(store_url)
    # a function of its own (its CREATE FUNCTION would run in a plain pg_restore)
    _execute(store_url, "CREATE FUNCTION gf_grant() RETURNS text LANGUAGE sql AS $$SELECT 'x'$$")
    bak = tmp_path / "s.bak"
    backup(store_url, bak)
    p = _gf(_env(fresh_url, tmp_path), "store", "restore", str(bak), "--force")
    assert p.returncode == 2 and "function public.gf_grant(), which no migration" in p.stderr, p.stdout + p.stderr
    assert _scalar(fresh_url, "SELECT count(*) FROM pg_proc WHERE proname = 'gf_grant'") == 0
    # an extra column: refused by the data it carries, too
    _execute(store_url, "DROP FUNCTION gf_grant(); ALTER TABLE tenants ADD COLUMN note text DEFAULT 'x'")
    backup(store_url, bak, force=True)
    p = _gf(_env(fresh_url, tmp_path), "store", "restore", str(bak), "--force")
    assert p.returncode == 2 and "its table tenants has columns" in p.stderr and "differ in note" in p.stderr, p.stderr
    with Store.open(fresh_url) as s:
        assert s.tenants() == []


def test_restored_tokens_are_listed_and_revoked_unless_kept_and_the_restore_is_an_event(
    store_url: str, fresh_url: str, tmp_path: Path
) -> None:
    secret = _source(store_url)
    bak = tmp_path / "s.bak"
    backup(store_url, bak)
    if store_url.startswith("sqlite"):  # SQLite's own statistics are data, not code: restored
        with sqlite3.connect(bak) as c:
            c.execute("ANALYZE")
    env = _env(fresh_url, tmp_path)
    p = _gf(env, "store", "restore", str(bak), "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert [(t["id"], t["name"], t["role"], t["tenant"], t["kept"]) for t in out["tokens"]] == [
        (1, "planted", "admin", None, False)
    ]
    sha = hashlib.sha256(bak.read_bytes()).hexdigest()
    assert out["sha256"] == sha
    with Store.open(fresh_url) as s:
        with pytest.raises(UnauthorizedError):
            Tokens(s).authenticate(secret)
        [ev] = [e for e in EventLog(s).list() if e.action == "store.restore"]
    assert ev.outcome == "ok" and ev.target == str(bak) and sha in ev.message and "revoked token(s) 1" in ev.message
    assert ev.role == "admin" and ev.actor

    # the text output lists them too; --keep-tokens keeps them (and says so in the event)
    p = _gf(env, "store", "restore", str(bak), "--force")
    assert p.returncode == 0, p.stderr
    assert "revoked 1 token(s) the backup holds: 1 planted (admin)" in p.stdout, p.stdout
    p = _gf(env, "store", "restore", str(bak), "--force", "--keep-tokens", "--json")
    assert p.returncode == 0, p.stderr
    assert [t["kept"] for t in json.loads(p.stdout)["tokens"]] == [True]
    with Store.open(fresh_url) as s:
        assert Tokens(s).authenticate(secret).name == "planted"
        [ev] = [e for e in EventLog(s).list() if e.action == "store.restore"]
    assert "kept token(s) 1" in ev.message
