"""Whole-module halves for ``--splits N --group K`` (scripts/test.sh runs the suite as two halves).

pytest-split's ``duration_based_chunks`` cuts the suite in collection order wherever the running
sum of durations reaches 1/N, which can fall inside a module: the tests after the cut then run in
another process without the ones before them (it broke tests twice). This plugin (loaded by
tests/conftest.py) takes over ``--splits``/``--group`` (it blocks pytest-split's splitting plugin;
pytest-split still stores the durations, ``make test-durations``) and assigns WHOLE modules: each
module weighs the sum of its tests' recorded durations (``--durations-path``); the modules are
placed heaviest first, each into the group with the least predicted time so far (ties: the lower
group, then the module's path), which is deterministic for a given durations file and set of
collected tests. A test not in the file counts as the median recorded test, a module none of whose
tests is in the file as the median recorded module. A group keeps the collection order.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

SPLIT_PLUGIN = "pytestsplitplugin"  # the name pytest-split registers its splitting plugin under


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def module_weights(nodeids: Iterable[str], durations: Mapping[str, float]) -> dict[str, float]:
    """Each module's predicted seconds: the recorded durations of its collected tests, summed."""
    recorded_modules: dict[str, float] = {}
    for nodeid, seconds in durations.items():
        recorded_modules[module_of(nodeid)] = recorded_modules.get(module_of(nodeid), 0.0) + seconds
    test_median = statistics.median(durations.values()) if durations else 1.0
    module_median = statistics.median(recorded_modules.values()) if recorded_modules else 1.0
    weights: dict[str, float] = {}
    for nodeid in nodeids:
        module = module_of(nodeid)
        if module not in recorded_modules:
            weights[module] = module_median
        else:
            weights[module] = weights.get(module, 0.0) + durations.get(nodeid, test_median)
    return weights


def assign(weights: Mapping[str, float], splits: int) -> list[list[str]]:
    """The modules of each group: heaviest first into the group with the least time so far."""
    groups: list[list[str]] = [[] for _ in range(splits)]
    totals = [0.0] * splits
    for module in sorted(weights, key=lambda m: (-weights[m], m)):
        lightest = min(range(splits), key=lambda g: (totals[g], g))
        groups[lightest].append(module)
        totals[lightest] += weights[module]
    return groups


def _load(path: str) -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(Path(path).read_text()).items()}
    except FileNotFoundError:
        return {}


class ModuleSplit:
    def __init__(self, config: pytest.Config) -> None:
        self.splits = int(config.option.splits)
        self.group = int(config.option.group)
        self.durations = _load(config.option.durations_path)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        weights = module_weights((item.nodeid for item in items), self.durations)
        groups = assign(weights, self.splits)
        mine = set(groups[self.group - 1])
        keep = [item for item in items if module_of(item.nodeid) in mine]
        drop = [item for item in items if module_of(item.nodeid) not in mine]
        items[:] = keep
        if drop:
            config.hook.pytest_deselected(items=drop)
        predicted = ", ".join(
            f"{'*' if i == self.group else ''}{i}: {len(g)} modules {sum(weights[m] for m in g):.0f} s"
            for i, g in enumerate(groups, 1)
        )
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                f"[split-modules] group {self.group}/{self.splits}, {len(keep)} tests; predicted per group: {predicted}"
            )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "splits", None) and getattr(config.option, "group", None):
        config.pluginmanager.set_blocked(SPLIT_PLUGIN)
        config.pluginmanager.register(ModuleSplit(config), "split-modules")
