"""Run named jobs one thread each (devices of a fabric, fabrics of a phase) and collect
their results; the first GpufabricError is raised after every job has finished, so no
device is left mid-transaction by an early return."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gpufabric.domain.errors import GpufabricError


def run_parallel(jobs: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
    """Run ``jobs`` one thread each; results by name (sorted); raise the first error after all finished."""
    if not jobs:
        return {}
    out: dict[str, Any] = {}
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {n: pool.submit(j) for n, j in jobs.items()}
        errors: list[BaseException] = []
        for n, f in sorted(futures.items()):
            exc = f.exception()
            if exc is None:
                out[n] = f.result()
            else:
                errors.append(exc)
    gf = [e for e in errors if isinstance(e, GpufabricError)]
    if gf:
        raise gf[0]
    if errors:
        raise errors[0]
    return out
