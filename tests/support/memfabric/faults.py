"""Fault injection shared by the in-memory drivers: arm an error for the next apply(s)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from gpufabric.domain.errors import GpufabricError


class Faults:
    """``arm(error, count=1, when=...)``: the next ``count`` applies for which ``when(arg)`` is
    true raise ``error`` before changing anything. Thread-safe (backends apply in parallel)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: list[tuple[GpufabricError, int, Callable[[object], bool]]] = []
        self.raised = 0

    def arm(self, error: GpufabricError, count: int = 1, when: Callable[[object], bool] = lambda _a: True) -> None:
        with self._lock:
            self._armed.append((error, count, when))

    def clear(self) -> None:
        with self._lock:
            self._armed.clear()

    def check(self, arg: object) -> None:
        with self._lock:
            for i, (err, n, when) in enumerate(self._armed):
                if when(arg):
                    if n <= 1:
                        del self._armed[i]
                    else:
                        self._armed[i] = (err, n - 1, when)
                    self.raised += 1
                    raise err
