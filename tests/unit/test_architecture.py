"""The layer rules of DEVELOPERS.md, enforced: import-linter contracts, module docstrings and size."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

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


def _store_side(path: Path) -> bool:
    """In the store: a module under ``store/``."""
    return path.relative_to(SRC).parts[0] == "store"


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
    assert not offenders, "outside the store (a new store module? put it under store/):\n" + (
        "\n".join(offenders))


def test_a_session_reach_outside_the_store_is_caught(tmp_path: Path) -> None:
    """The grep above can fail: a line of the kind it looks for, in an engine module, is found."""
    assert SESSION_USE.search("        with self.store._tx() as s:")
    assert SESSION_USE.search("    rows = tx.session.scalars(q)")
    assert SESSION_USE.search("from sqlalchemy.orm import Session")
    assert not SESSION_USE.search("        with self.store.tx() as tx:")
    assert _store_side(SRC / "store" / "moves.py") and not _store_side(SRC / "engine" / "moves.py")


def _contracts() -> list[dict[str, Any]]:
    cfg = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text())
    return list(cfg["tool"]["importlinter"]["contracts"])


def _constrained_packages() -> set[str]:
    """Top-level packages whose imports a contract bounds: a layer of a layers contract over the whole
    tree, or the source of a forbidden contract."""
    out: set[str] = set()
    for c in _contracts():
        if c["type"] == "layers" and "containers" not in c:
            names = [n for layer in c["layers"] for n in layer.strip("()").split("|")]
        elif c["type"] == "forbidden":
            names = list(c["source_modules"])
        else:
            continue
        out |= {n.strip().split(".")[1] for n in names if n.strip().count(".") == 1}
    return out


def test_every_package_is_bound_by_an_import_contract() -> None:
    """Every module of the tree sits in a top-level package whose imports an import-linter contract of
    pyproject.toml bounds (a layer of the layers contracts, or a forbidden contract's source): a new
    package, or a module put beside the packages, has no rules until a contract names it."""
    tops = {p.relative_to(SRC).parts[0] for p in SRC.rglob("*.py") if p.relative_to(SRC).parts[0] != "__init__.py"}
    unbound = sorted(tops - _constrained_packages())
    assert unbound == [], f"name these in an import-linter contract of pyproject.toml: {unbound}"


def test_the_module_table_names_every_module() -> None:
    """docs/modules.md is generated from the tree (modules, and their docstrings' first sentences):
    a module moved, added or removed, or a docstring's first sentence changed, shows there once
    ``python tools/module_table.py`` runs again (the line counts are not compared)."""
    p = subprocess.run([sys.executable, str(SRC.parents[1] / "tools" / "module_table.py"), "--check"],
                       capture_output=True, text=True, check=False)  # fmt: skip
    assert p.returncode == 0, p.stderr + "run: python tools/module_table.py"
