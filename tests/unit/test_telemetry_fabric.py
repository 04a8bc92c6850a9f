"""The fabric series of /metrics: each backend's own text, a failing fabric named, scrapes cached."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from gpufabric.domain.errors import UnavailableError
from gpufabric.runtime.telemetry import Cached, fabric_metrics


class _Backend:
    def __init__(self, text: str = "", fail: bool = False) -> None:
        self.text, self.fail, self.calls = text, fail, 0

    def metrics(self, tenancy: Any) -> str:
        self.calls += 1
        if self.fail:
            raise UnavailableError("dpu unreachable", field="dpu")
        return self.text


def _engine(**backends: _Backend) -> Any:
    return SimpleNamespace(tenancy=lambda: "T", fabrics=SimpleNamespace(backends=backends))


def test_fabric_metrics_joins_backends_and_names_failures() -> None:
    text = fabric_metrics(_engine(a=_Backend("x 1\n"), b=_Backend(fail=True), c=_Backend("y 2\n")))
    assert text == 'x 1\ny 2\n# TYPE gpufabric_fabric_metrics_failed gauge\ngpufabric_fabric_metrics_failed{fabric="b"} 1\n'


def test_cached_reads_once_per_ttl() -> None:
    now = [100.0]
    calls: list[int] = []

    def fn() -> str:
        calls.append(1)
        return f"v{len(calls)}"

    c = Cached(fn, ttl=10, clock=lambda: now[0])
    assert (c(), c()) == ("v1", "v1")
    now[0] += 9.9
    assert c() == "v1"
    now[0] += 0.2
    assert c() == "v2" and len(calls) == 2
