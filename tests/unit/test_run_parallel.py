"""transport.parallel.run_parallel: every job runs, the last in the caller's thread (a lone job
starts no thread), results by name, and the first error only after every job has finished."""

from __future__ import annotations

import threading
import time

import pytest

from gpufabric.domain.errors import FabricError
from gpufabric.transport.parallel import run_parallel


def test_results_by_name_and_the_last_job_in_the_callers_thread() -> None:
    here = threading.get_ident()
    seen: dict[str, int] = {}

    def job(name: str, value: int) -> int:
        seen[name] = threading.get_ident()
        return value

    out = run_parallel({"b": lambda: job("b", 2), "a": lambda: job("a", 1), "c": lambda: job("c", 3)})
    assert list(out.items()) == [("a", 1), ("b", 2), ("c", 3)]
    assert seen["c"] == here and seen["a"] != here and seen["b"] != here
    assert run_parallel({"only": lambda: job("only", 7)}) == {"only": 7} and seen["only"] == here
    assert run_parallel({}) == {}


def test_a_failing_inline_job_is_raised_after_the_others_finished() -> None:
    finished: list[str] = []

    def slow() -> str:
        time.sleep(0.2)
        finished.append("slow")
        return "ok"

    def fails() -> str:
        raise FabricError("switch sw1 refused", fabric="ethernet")

    with pytest.raises(FabricError, match="sw1 refused"):
        run_parallel({"a-slow": slow, "z-fails": fails})  # z-fails runs inline, first to end
    assert finished == ["slow"]


def test_the_first_gpufabric_error_by_name_wins_over_other_errors() -> None:
    def boom() -> None:
        raise RuntimeError("bug")

    def refused() -> None:
        raise FabricError("refused", fabric="infiniband")

    with pytest.raises(FabricError):
        run_parallel({"a": boom, "b": refused})
    with pytest.raises(RuntimeError):
        run_parallel({"a": boom, "b": lambda: None})
