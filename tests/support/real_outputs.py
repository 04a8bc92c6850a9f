"""The corpus of real device outputs (tests/fixtures/real/): manifests and where the files are.

Each ``<parser>/<file>.source.yaml`` names the public repository, path and commit an output was
copied from, its sha256 and the reading expected of it (written by hand). The outputs whose
repository's licence permits redistribution are committed next to their manifest
(:func:`redistributable`; the licences in ``LICENSES/``); the others are not, and
:func:`locate` finds them in ``$GPUFABRIC_REAL_OUTPUTS``, in ``../shared/real-outputs`` beside
the repository, or next to the manifest, and checks the sha256. A test given a manifest whose
file is absent skips, naming the file.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REAL = Path(__file__).parents[1] / "fixtures" / "real"
REPO = Path(__file__).parents[2]


@dataclass(frozen=True)
class Manifest:
    parser: str  # e.g. "ibnetdiscover", "ethernet/eos", "dpu-flows"
    file: str
    doc: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.parser}/{self.file}"

    @property
    def expected(self) -> dict[str, Any]:
        exp = self.doc["expected"]
        assert isinstance(exp, dict)
        return exp


def manifests(parser: str) -> list[Manifest]:
    """Every manifest under tests/fixtures/real/<parser>/, sorted by file name."""
    out = []
    for p in sorted((REAL / parser).glob("*.source.yaml")):
        doc = yaml.safe_load(p.read_text())
        for key in ("file", "sha256", "repo", "path", "commit", "device", "expected"):
            assert key in doc, f"{p}: {key} missing"
        out.append(Manifest(parser, doc["file"], doc))
    return out


PERMISSIVE = ("Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "MIT", "CC-BY-4.0")


def redistributable(m: Manifest) -> bool:
    """The output may be committed: its licence is a permissive one and its repository is known
    (an unresolved source cannot carry its copyright notice)."""
    repo = str(m.doc["repo"])
    return str(m.doc.get("license", "")).startswith(PERMISSIVE) and "/" in repo and not repo.startswith("unresolved")


def all_manifests() -> list[Manifest]:
    """Every manifest of the corpus, whatever its parser."""
    parsers = sorted({str(p.parent.relative_to(REAL)) for p in REAL.rglob("*.source.yaml")})
    return [m for parser in parsers for m in manifests(parser)]


def manifest(parser: str, file: str) -> Manifest:
    return next(m for m in manifests(parser) if m.file == file)


def _roots() -> list[Path]:
    roots = [Path(r) for r in [os.environ.get("GPUFABRIC_REAL_OUTPUTS", "")] if r]
    return [*roots, REPO.parent / "shared" / "real-outputs", REAL]


def locate(m: Manifest) -> Path | None:
    """The output's file (sha256 checked), or None when no root holds it."""
    for root in _roots():
        p = root / m.parser / m.file
        if p.is_file():
            digest = hashlib.sha256(p.read_bytes()).hexdigest()
            assert digest == m.doc["sha256"], f"{p}: sha256 {digest} is not the manifest's {m.doc['sha256']}"
            return p
    return None


def real_output(m: Manifest) -> str:
    """The output's text; skips the test when the file is absent."""
    p = locate(m)
    if p is None:
        pytest.skip(
            f"real output {m.id} not present (from {m.doc['repo']}:{m.doc['path']}, see tests/fixtures/real/README.md)"
        )
    return p.read_text(errors="replace")


def real_path(m: Manifest) -> Path:
    p = locate(m)
    if p is None:
        pytest.skip(
            f"real output {m.id} not present (from {m.doc['repo']}:{m.doc['path']}, see tests/fixtures/real/README.md)"
        )
    return p
