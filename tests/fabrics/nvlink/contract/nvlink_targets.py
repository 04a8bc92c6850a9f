"""NVLink drivers the driver contract suite runs against: one factory per driver.

A factory is a context manager ``factory(run_dir) -> FmTarget`` yielding a driver over
``NODES`` (each FM fresh: an HGX H100 8-GPU board, nothing active), a way to make another
driver over the same FMs, and the hands that change an FM behind the driver's back. To add a
driver, add ONE line to ``FM_TARGETS``.

* ``fmpm``: :class:`Fmpm` running the lab's stand-in ``fmpm`` (``python -m
  gpufabric.lab.fmpm_standin``) as subprocesses, one FM per node over its unix socket path,
  ``nvidia-smi -q`` through the stand-in too;
* ``memory``: :class:`support.memfm.MemoryFm` (the stand-in's state and FM's rules, in memory).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpufabric.fabrics.nvlink.drivers.base import FmDriver
from gpufabric.fabrics.nvlink.drivers.fmpm.driver import Fmpm
from gpufabric.fabrics.nvlink.readers.fmreturn import FmReturn
from gpufabric.lab import fmpm_standin

from support.memfm import MemoryFm

NODES = ("gpu-a01", "gpu-a02")
BOARD = "hgx-h100-8gpu"
STANDIN = [sys.executable, "-m", "gpufabric.lab.fmpm_standin"]


@dataclass(frozen=True)
class FmTarget:
    driver: FmDriver
    fresh: Callable[[], FmDriver]  # another driver over the same FMs (remembers nothing)
    by_hand: Callable[[str, int], FmReturn]  # activate a partition on a node's FM, not through the driver
    restart: Callable[[str], None]  # the node's FM restarts: it forgets its active set
    stop: Callable[[str], None]  # the node's FM is gone


@contextmanager
def fmpm_target(run_dir: Path) -> Iterator[FmTarget]:
    socks = {n: run_dir / f"{n}.fm" for n in NODES}

    def fm(node: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*STANDIN, "--unix-domain-socket", str(socks[node]), *args],
                              capture_output=True, text=True, check=False)  # fmt: skip

    for n in NODES:
        assert fm(n, "--standin-init", BOARD).returncode == 0

    def make() -> FmDriver:
        smi = {n: [*STANDIN, "--unix-domain-socket", str(p), "--standin-nvidia-smi-q"] for n, p in socks.items()}
        return Fmpm(fm={n: f"unix:{p}" for n, p in socks.items()}, fmpm=STANDIN, smi=smi)

    def by_hand(node: str, pid: int) -> FmReturn:
        rc = fm(node, "-a", str(pid)).returncode
        return FmReturn(rc - 256 if rc > 127 else rc)

    def restart(node: str) -> None:
        assert fm(node, "--standin-restart").returncode == 0

    yield FmTarget(make(), make, by_hand, restart, lambda node: socks[node].unlink())


@contextmanager
def memory_target(run_dir: Path) -> Iterator[FmTarget]:
    fms: dict[str, dict[str, Any] | None] = {
        n: fmpm_standin.init_state(run_dir / f"{n}.fm", BOARD, node=n) for n in NODES
    }

    def by_hand(node: str, pid: int) -> FmReturn:
        state = fms[node]
        assert state is not None
        return fmpm_standin.activate(state, pid)

    def restart(node: str) -> None:
        state = fms[node]
        assert state is not None
        state["active"] = []

    yield FmTarget(MemoryFm(fms), lambda: MemoryFm(fms), by_hand, restart, lambda node: fms.__setitem__(node, None))


FmTargetFactory = Callable[[Path], AbstractContextManager[FmTarget]]

FM_TARGETS = [
    pytest.param(fmpm_target, id="fmpm-standin"),
    pytest.param(memory_target, id="memory"),
]
