"""The layer rules of DEVELOPERS.md, enforced: import-linter contracts, module docstrings and size."""

from __future__ import annotations

import ast
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
    from gpufabric.service import db

    assert db.head_revision() == db.HEAD_REVISION
