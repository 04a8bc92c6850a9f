"""Integration tests (``-m integration``, run by ``make test-integration``): a real Neutron in
its own venv. They are deselected from a plain ``pytest`` run (so ``make test`` stays inside the
CI budget) unless the marker expression asks for them."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "integration" in (config.getoption("markexpr") or ""):
        return
    keep = [i for i in items if i.get_closest_marker("integration") is None]
    dropped = [i for i in items if i.get_closest_marker("integration") is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
