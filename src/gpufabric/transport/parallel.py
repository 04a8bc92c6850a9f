"""Run named jobs one thread each (devices of a fabric, fabrics of a phase) and collect
their results; the first GpufabricError is raised after every job has finished, so no
device is left mid-transaction by an early return. The last job runs in the caller's own
thread (a lone job starts no thread; a move's phase on two fabrics starts one): a thread's
start waits until it is scheduled, which on a loaded host costs more than the job's own setup."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gpufabric.domain.errors import GpufabricError


def run_parallel(jobs: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
    """Run ``jobs`` at once (the last in this thread); results by name (sorted); raise the first error after all finished."""
    if not jobs:
        return {}
    *others, (last, last_job) = jobs.items()
    done: dict[str, tuple[Any, BaseException | None]] = {}
    with ThreadPoolExecutor(max_workers=max(1, len(others))) as pool:
        futures = {n: pool.submit(j) for n, j in others}
        try:
            done[last] = (last_job(), None)
        except BaseException as e:  # raised below, once every other job has finished
            done[last] = (None, e)
        for n, f in futures.items():
            exc = f.exception()
            done[n] = (None, exc) if exc is not None else (f.result(), None)
    errors = [e for _, (_, e) in sorted(done.items()) if e is not None]
    gf = [e for e in errors if isinstance(e, GpufabricError)]
    if gf:
        raise gf[0]
    if errors:
        raise errors[0]
    return {n: v for n, (v, _) in sorted(done.items())}
