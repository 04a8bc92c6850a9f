"""The layer rules of DEVELOPERS.md, enforced: import-linter contracts, module docstrings and size."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "gpufabric"


def test_import_contracts_kept() -> None:
    exe = Path(sys.executable).parent / "lint-imports"
    p = subprocess.run([str(exe)], capture_output=True, text=True, cwd=SRC.parents[1], check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "0 broken" in p.stdout


MODULES = sorted(p for p in SRC.rglob("*.py") if p.name != "__init__.py" and "migrations" not in p.parts)


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(SRC)) for p in MODULES])
def test_module_has_docstring_and_stays_small(path: Path) -> None:
    text = path.read_text()
    assert ast.get_docstring(ast.parse(text)), f"{path} has no module docstring"
    assert len(text.splitlines()) <= 450, f"{path} has {len(text.splitlines())} lines (keep modules under ~400)"


def test_store_head_revision_constant_matches_the_migration_scripts() -> None:
    from gpufabric.store import db

    assert db.head_revision() == db.HEAD_REVISION


def _split_mapping() -> dict[str, str]:
    """tools/split_service.py's table: old service module -> new dotted module (the store side is ``store.*``)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("split_service", SRC.parents[1] / "tools" / "split_service.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return dict(mod.MAPPING)


def _store_side(path: Path) -> bool:
    """In the store: under ``store/`` (after the split) or, before it, a ``service/`` module the split puts there."""
    rel = path.relative_to(SRC).parts
    if rel[0] == "store":
        return True
    if rel[0] != "service":
        return False
    target = _split_mapping().get(rel[1] if len(rel) > 2 else Path(rel[1]).stem)
    return target is not None and target.startswith("store.")


SESSION_USE = re.compile(r"\bSession\b|\._tx\b|\btx\.session\b|\bsessionmaker\b|sqlalchemy\.orm|\._engine\b")


def test_only_the_store_touches_a_session() -> None:
    """The unit of work is ``with store.tx() as tx:``; only the store's modules run queries on its
    session. Everything else (engine, workflow, runtime, api, cli, ...) passes ``tx`` to store functions."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if _store_side(path):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if SESSION_USE.search(line):
                offenders.append(f"{path.relative_to(SRC)}:{n}: {line.strip()}")
    assert not offenders, "outside the store (a new store module? map it under store. in tools/split_service.py):\n" + (
        "\n".join(offenders))


def test_a_session_reach_outside_the_store_is_caught(tmp_path: Path) -> None:
    """The grep above can fail: a line of the kind it looks for, in an engine module, is found."""
    assert SESSION_USE.search("        with self.store._tx() as s:")
    assert SESSION_USE.search("    rows = tx.session.scalars(q)")
    assert SESSION_USE.search("from sqlalchemy.orm import Session")
    assert not SESSION_USE.search("        with self.store.tx() as tx:")
    assert _store_side(SRC / "service" / "store_moves.py") and not _store_side(SRC / "service" / "moves.py")
    assert _store_side(SRC / "store" / "moves.py") and not _store_side(SRC / "engine" / "moves.py")


def test_every_service_module_has_a_place_in_the_package_split() -> None:
    """tools/split_service.py moves each module of ``service/`` to its package; one it does not know
    (a module added since) would stay behind: name its package in the script's MAPPING."""
    service = SRC / "service"
    if not service.is_dir():
        return  # split already
    mapping = _split_mapping()
    here = {p.stem for p in service.glob("*.py") if p.stem != "__init__"} | {"migrations"}
    assert sorted(here - set(mapping)) == [], "add these to MAPPING in tools/split_service.py"
    layers = {t.split(".")[0] for t in mapping.values()}
    assert layers == {"store", "engine", "workflow", "runtime"}
