"""What a restore checks in a backup before anything of it reaches a store.

A backup is data, not code. Its schema must be exactly what gpufabric's migrations make at the
backup's revision, compared with a store freshly migrated to that revision:

- SQLite: every object of ``sqlite_master`` (table, index, trigger, view) by type, name and SQL;
  an object the migrations do not make (a trigger that deletes its own event rows), or one they
  make differently, refuses the backup, naming it.
- PostgreSQL: the dump's table of contents (``pg_restore --list``) may name only the objects the
  migrated catalog holds (tables, sequences, indexes, constraints, triggers, functions) and their
  data; anything else (a function or trigger of its own, a view, a rule, an extension, ...) refuses
  it. The dump's SQL is never run: the schema comes from the migrations, and the rows from the
  dump's data rendered as text (``pg_restore --data-only --file=-``), whose every line is checked
  (a COPY of a known table with exactly its columns, its rows up to ``\\.``, and the dump's own
  session settings and sequence values, read and never run); the rows go in through COPY
  statements gpufabric writes.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sqlalchemy import Connection, create_engine, text

from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.store import db

NAMED_KINDS: Final = {
    "TABLE": "table", "SEQUENCE": "sequence", "SEQUENCE OWNED BY": "sequence", "SEQUENCE SET": "sequence",
    "TABLE DATA": "table", "INDEX": "index", "CONSTRAINT": "constraint", "FK CONSTRAINT": "constraint",
    "TRIGGER": "trigger", "FUNCTION": "function", "DEFAULT": "default",
}  # fmt: skip
"""The dump's entry types that may appear, by the catalog kind their name must be one of."""
MAX_NAMED: Final = 8
"""At most this many objects a refusal names."""
UNNAMED_KINDS: Final = frozenset({"ENCODING", "STDSTRINGS", "SEARCHPATH"})
_TOC_LINE: Final = re.compile(r"^\d+; \d+ \d+ (?P<rest>.*)$")
_COPY: Final = re.compile(r'^COPY public\.(?P<table>"[^"]+"|\w+) \((?P<cols>[^)]*)\) FROM stdin;$')
_SCRIPT_OK: Final = re.compile(
    r"^(--.*|SET \w+ = [\w'.-]+;|SELECT pg_catalog\.set_config\('search_path', '', false\);"
    r"|SELECT pg_catalog\.setval\('public\.\w+', \d+, (true|false)\);|\\(un)?restrict \w+|)$"
)


def _refuse(path: Path, revision: str, why: str) -> ValidationError:
    return ValidationError("path", str(path), f"a backup whose schema is what the migrations make at revision {revision}", why)


def _sql(s: str | None) -> str:
    """An object's SQL, whitespace-normalised; a table's columns and constraints sorted (a batch
    migration recreates a table with its constraints in no fixed order)."""
    sql = " ".join((s or "").split())
    if not sql.upper().startswith("CREATE TABLE") or "(" not in sql:
        return sql
    head, body = sql.split("(", 1)
    body, _, tail = body.rpartition(")")
    parts, depth, cur = [], 0, ""
    for ch in body:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return f"{head.strip()} ({', '.join(sorted(parts))}){tail}"


# ---------------------------------------------------------------------------------------- SQLite
def _sqlite_objects(conn: Connection) -> dict[tuple[str, str], str]:
    """(type, name) -> SQL of every object but SQLite's own statistics (``ANALYZE``: data, no code)."""
    q = "SELECT type, name, sql FROM sqlite_master WHERE NOT (type = 'table' AND name LIKE 'sqlite\\_stat%' ESCAPE '\\')"
    rows = conn.execute(text(q)).all()
    return {(str(t), str(n)): _sql(s) for t, n, s in rows}


def migrated_sqlite(revision: str) -> dict[tuple[str, str], str]:
    """The objects of a fresh SQLite store migrated to ``revision``: (type, name) -> its SQL."""
    with tempfile.TemporaryDirectory(prefix="gpufabric-schema-") as d:
        engine = create_engine(f"sqlite:///{Path(d) / 'schema.db'}")
        try:
            with engine.begin() as conn:
                db.upgrade_to(conn, revision)
            with engine.connect() as conn:
                return _sqlite_objects(conn)
        finally:
            engine.dispose()


def check_sqlite(path: Path, revision: str) -> None:
    """ValidationError naming the first object of the SQLite backup at ``path`` that the
    migrations at ``revision`` do not make, or make otherwise (or one missing)."""
    engine = create_engine(f"sqlite:///file:{path}?mode=ro&uri=true")
    try:
        with engine.connect() as conn:
            got = _sqlite_objects(conn)
    finally:
        engine.dispose()
    want = migrated_sqlite(revision)
    found = [f"{k[0]} {k[1]}, which no migration makes ({got[k][:120]})" for k in sorted(got.keys() - want.keys())]
    found += [f"no {k[0]} {k[1]}" for k in sorted(want.keys() - got.keys())]
    found += [f"{k[0]} {k[1]} as the migrations do not make it ({got[k][:120]})"
              for k in sorted(k for k in got.keys() & want.keys() if got[k] != want[k])]  # fmt: skip
    if found:
        more = f"; and {len(found) - MAX_NAMED} more" if len(found) > MAX_NAMED else ""
        raise _refuse(path, revision, f"it holds {'; '.join(found[:MAX_NAMED])}{more}")


# ------------------------------------------------------------------------------------ PostgreSQL
@dataclass(frozen=True)
class Catalog:
    """The names a store migrated to a revision holds, by kind, and each table's columns."""

    names: Mapping[str, frozenset[str]]
    columns: Mapping[str, tuple[str, ...]]


def pg_catalog(conn: Connection) -> Catalog:
    """The catalog of the current schema, as a dump's table of contents names it."""
    def q(sql: str) -> frozenset[str]:
        return frozenset(str(x) for x in conn.execute(text(sql)).scalars())

    ns = "(SELECT oid FROM pg_namespace WHERE nspname = current_schema())"
    rels = {k: q(f"SELECT relname FROM pg_class WHERE relnamespace = {ns} AND relkind = '{c}'")
            for k, c in (("table", "r"), ("sequence", "S"), ("index", "i"))}  # fmt: skip
    cols: dict[str, list[str]] = {}
    for t, c in conn.execute(text(
        "SELECT c.relname, a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
        f" WHERE c.relnamespace = {ns} AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped ORDER BY c.relname, a.attnum"
    )):  # fmt: skip
        cols.setdefault(str(t), []).append(str(c))
    names = {
        **rels,
        "constraint": q(f"SELECT c.relname || ' ' || k.conname FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid"
                        f" WHERE c.relnamespace = {ns}"),
        "trigger": q(f"SELECT c.relname || ' ' || t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
                     f" WHERE c.relnamespace = {ns} AND NOT t.tgisinternal"),
        "function": q(f"SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' FROM pg_proc p"
                      f" WHERE p.pronamespace = {ns}"),
        "default": frozenset(f"{t} {c}" for t, cs in cols.items() for c in cs),
    }  # fmt: skip
    return Catalog(names, {t: tuple(cs) for t, cs in cols.items()})


def _run(args: list[str], env: Mapping[str, str], path: Path) -> str:
    try:
        p = subprocess.run(args, env=dict(env), capture_output=True, text=True, timeout=3600, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError("pg_restore", Path(args[0]).name, "a PostgreSQL client tool that runs", str(e)) from None
    if p.returncode != 0:
        raise ValidationError("path", str(path), "a pg_dump custom-format backup", db.redact(p.stderr.strip()[-200:]))
    return p.stdout


def check_toc(pg_restore: str, path: Path, env: Mapping[str, str], catalog: Catalog, revision: str) -> None:
    """ValidationError naming the first entry of the dump at ``path`` that ``catalog`` (a store
    migrated to ``revision``) does not hold."""
    extra = []
    for line in _run([pg_restore, "--list", str(path)], env, path).splitlines():
        m = _TOC_LINE.match(line)
        if not m:
            continue
        rest = m["rest"]
        kind = next((k for k in sorted({*NAMED_KINDS, *UNNAMED_KINDS}, key=len, reverse=True)
                     if rest.startswith(k + " ")), None)  # fmt: skip
        if kind is None:
            extra.append(rest.rsplit(" ", 1)[0].lower())
            continue
        if kind in UNNAMED_KINDS:
            continue
        words = rest[len(kind) + 1:].split(" ")
        schema, name = words[0], " ".join(words[1:-1])
        if schema != "public" or name not in catalog.names[NAMED_KINDS[kind]]:
            extra.append(f"{kind.lower()} {schema}.{name}")
    if extra:
        more = f" and {len(extra) - MAX_NAMED} more" if len(extra) > MAX_NAMED else ""
        raise _refuse(path, revision, f"its dump holds {', '.join(extra[:MAX_NAMED])}{more}, which no migration makes")


def _column(c: str) -> str:
    c = c.strip()
    return c[1:-1].replace('""', '"') if c.startswith('"') and c.endswith('"') else c


def data_blocks(pg_restore: str, path: Path, env: Mapping[str, str], catalog: Catalog,
                revision: str) -> dict[str, tuple[tuple[str, ...], list[str]]]:  # fmt: skip
    """The rows of the dump at ``path`` by table: (its columns, its COPY text lines), each COPY
    checked against ``catalog``; any other statement refuses the dump, naming it."""
    lines = _run([pg_restore, "--data-only", "--file=-", str(path)], env, path).split("\n")
    out: dict[str, tuple[tuple[str, ...], list[str]]] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _COPY.match(line)
        if m is None:
            if not _SCRIPT_OK.match(line):
                raise _refuse(path, revision, f"its data holds a statement gpufabric does not run: {line[:120]}")
            i += 1
            continue
        table, cols = _column(m["table"]), tuple(_column(c) for c in m["cols"].split(","))
        if table not in catalog.columns or table in out:
            raise _refuse(path, revision, f"its data fills table {table}, which no migration makes (or twice)")
        if sorted(cols) != sorted(catalog.columns[table]):
            extra = sorted(set(cols) - set(catalog.columns[table])) or sorted(set(catalog.columns[table]) - set(cols))
            raise _refuse(path, revision, f"its table {table} has columns {', '.join(cols)}; the migrations' differ"
                                          f" in {', '.join(extra)}")  # fmt: skip
        try:
            end = lines.index("\\.", i + 1)
        except ValueError:
            raise _refuse(path, revision, f"its data of table {table} never ends") from None
        out[table] = (cols, lines[i + 1:end])
        i = end + 1
    return out
