"""tests/support/split_modules.py: ``--splits 2 --group K`` (scripts/test.sh's halves) keeps every
module whole, collects every test exactly once across the groups, and balances recorded time.

A sample tree (run in a subprocess with this venv's pytest) has a module whose tests depend on
their order and whose durations put pytest-split's ``duration_based_chunks`` cut inside it: that
cut is shown first (so the sample is a real case), then the plugin's halves are collected and run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.split_modules import assign, module_weights

TESTS = Path(__file__).resolve().parents[1]
DURATIONS = TESTS / "durations.json"

# module -> (test name, recorded seconds); test_b's tests run in order (b2 needs b1's value)
SAMPLE = {
    "test_a.py": [("a1", 2.0), ("a2", 1.0)],
    "test_b.py": [("b1", 1.0), ("b2", 1.0), ("b3", 1.0)],
    "test_c.py": [("c1", 1.5)],
    "test_d.py": [("d1", 0.5)],
}
B = """SEEN = []


def test_b1():
    SEEN.append(1)


def test_b2():
    assert SEEN == [1]


def test_b3():
    assert SEEN == [1]
"""


def _sample(tmp_path: Path) -> Path:
    root = tmp_path / "sample"
    root.mkdir()
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:kmock\n")  # as pyproject.toml
    durations = {}
    for module, tests in SAMPLE.items():
        body = B if module == "test_b.py" else "".join(f"def test_{name}():\n    pass\n\n\n" for name, _ in tests)
        (root / module).write_text(body)
        durations.update({f"{module}::test_{name}": seconds for name, seconds in tests})
    (root / "test_new.py").write_text("def test_new():\n    pass\n")  # not in the durations file
    (root / "durations.json").write_text(json.dumps(durations))
    return root


def _pytest(root: Path, *args: str, plugin: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    extra = ["-p", "support.split_modules"] if plugin else []
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *extra, "--durations-path", "durations.json", *args],
        cwd=root, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _collected(root: Path, group: int | None, plugin: bool = True) -> list[str]:
    split = ["--splits", "2", "--group", str(group)] if group else []
    p = _pytest(root, "--collect-only", "-q", *split, plugin=plugin)
    assert p.returncode == 0, p.stdout + p.stderr
    return [line for line in p.stdout.splitlines() if "::" in line]


def test_pytest_split_alone_cuts_the_ordered_module(tmp_path: Path) -> None:
    root = _sample(tmp_path)
    one, two = (_collected(root, g, plugin=False) for g in (1, 2))
    assert {n.split("::")[0] for n in one} & {n.split("::")[0] for n in two} == {"test_b.py"}
    assert _pytest(root, "--splits", "2", "--group", "2", plugin=False).returncode == 1  # b2/b3 without b1


def test_halves_keep_modules_whole_and_collect_every_test_once(tmp_path: Path) -> None:
    root = _sample(tmp_path)
    everything = _collected(root, None)
    one, two = _collected(root, 1), _collected(root, 2)
    assert len(everything) == 8
    assert sorted(one + two) == sorted(everything) and not set(one) & set(two)
    assert not {n.split("::")[0] for n in one} & {n.split("::")[0] for n in two}
    # heaviest first into the lighter group, ties to the lower group: a 3 -> 1, b 3 -> 2, new (not
    # recorded: the median module, 2.25) -> 1, c 1.5 -> 2, d 0.5 -> 2; predicted 5.25 and 5.0 s
    assert {n.split("::")[0] for n in one} == {"test_a.py", "test_new.py"}
    assert {n.split("::")[0] for n in two} == {"test_b.py", "test_c.py", "test_d.py"}
    out = _pytest(root, "--collect-only", "-q", "--splits", "2", "--group", "1").stdout
    assert "group 1/2, 3 tests; predicted per group: *1: 2 modules 5 s, 2: 3 modules 5 s" in out, out
    for group in (1, 2):
        run = _pytest(root, "-q", "--splits", "2", "--group", str(group))
        assert run.returncode == 0, run.stdout


def test_weights_and_assignment() -> None:
    durations = {"m1.py::t1": 4.0, "m1.py::t2": 2.0, "m2.py::t": 1.0, "m3.py::t": 3.0}
    # m1's unrecorded t3 counts as the median test (2.5); unknown m9 as the median module (3.0)
    weights = module_weights(["m1.py::t1", "m1.py::t2", "m1.py::t3", "m2.py::t", "m9.py::x", "m9.py::y"], durations)
    assert weights == {"m1.py": 8.5, "m2.py": 1.0, "m9.py": 3.0}
    assert assign(weights, 2) == [["m1.py"], ["m9.py", "m2.py"]]
    assert assign({"b": 1.0, "a": 1.0, "c": 1.0}, 2) == [["a", "c"], ["b"]]  # ties: by path, lower group


def test_the_recorded_suite_halves_balance() -> None:
    durations = json.loads(DURATIONS.read_text())
    weights = module_weights(durations, durations)
    one, two = assign(weights, 2)
    assert sorted(one + two) == sorted(weights) and not set(one) & set(two)
    t1, t2 = (sum(weights[m] for m in g) for g in (one, two))
    assert abs(t1 - t2) <= max(weights.values()) and abs(t1 - t2) / (t1 + t2) < 0.05, (t1, t2)
