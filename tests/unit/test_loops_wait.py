"""``Loops.start(..., wait=)``: the move worker's loop waits what its engine says (until a held
move turns stale) rather than its fixed interval; without ``wait`` the interval holds."""

from __future__ import annotations

import time

from gpufabric.runtime.loops import Loops


def test_wait_shortens_the_interval_and_without_it_the_interval_holds() -> None:
    loops = Loops()
    asked: list[float] = []

    def wait(tick: float) -> float:
        asked.append(tick)
        return 0.01

    fast = loops.start("worker", lambda: None, 30.0, wait=wait)
    slow = loops.start("other", lambda: None, 30.0)
    deadline = time.monotonic() + 10
    while fast.passes < 5:
        assert time.monotonic() < deadline, fast.to_dict()
        time.sleep(0.01)
    loops.shutdown()
    assert slow.passes == 1 and set(asked) == {30.0}
