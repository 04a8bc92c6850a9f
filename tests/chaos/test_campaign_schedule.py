"""The campaign's schedule is a function of its seed (a failing run is replayed from it), and the
checker reads the fabrics with its own code: it imports nothing from gpufabric."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

from chaos.campaign import FAULTS, schedule, violations


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    nodes = ["gpu-a01", "gpu-a02"]
    a = schedule(1234, 600, nodes=nodes)
    assert a == schedule(1234, 600, nodes=nodes)
    assert a != schedule(1235, 600, nodes=nodes)
    assert {f.kind for f in a} == set(FAULTS), "a long campaign draws every kind of fault"
    assert all(f.target in nodes for f in a if f.kind == "fmpm_restart")
    gaps = [b.at - x.at for x, b in itertools.pairwise(a)]
    assert all(g >= 8.0 - 1e-6 for g in gaps) and all(0 < f.at < 600 for f in a)


def test_a_short_schedule_fits_its_duration() -> None:
    assert all(f.at < 90 for f in schedule(7, 90))
    assert schedule(7, 0) == []


@pytest.mark.parametrize("module", ["checker.py", "readers.py"])
def test_the_checker_imports_nothing_from_gpufabric(module: str) -> None:
    tree = ast.parse((Path(__file__).parent / module).read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert names and not [x for x in names if x.split(".")[0] == "gpufabric"], names


def test_a_campaign_with_a_split_or_a_lost_move_fails() -> None:
    clean = {k: [] for k in ("splits", "lost", "duplicated", "unfinished", "unrequested", "running_twice",
                             "persistent_disagreements", "final_state_errors", "failed_in_tenant")}  # fmt: skip
    clean |= {"final_disagreements": {}, "unconverged_faults": 0}
    assert violations(clean) == []
    assert violations(clean | {"splits": ["gpu-a01 in ['alpha', 'beta']"]})
    assert violations(clean | {"lost": [7]})
    assert violations(clean | {"unconverged_faults": 1})
