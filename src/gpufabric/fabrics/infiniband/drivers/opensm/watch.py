"""A cheap rogue-SM watch: a few SMPs a second, between the reconcile passes.

Each pass (:meth:`SmWatch.check`) sends ONE read through the driver's SMP reader: SMInfo of
the trusted master's LID and PortInfo of a rotating sample of CA ports (``sample`` per pass,
so every port is looked at within ``ports / sample`` passes). A rogue that took over shows
at once: the master's SMInfo is no longer MASTER, or a sampled port's MasterSMLID points
elsewhere (a rogue with its own sm_key stays MASTER next to the trusted one, but every port
it sweeps names it), or a sampled port that is not a trusted SM port has IsSM set. The
watch only *suspects* (:func:`suspicions`, pure); the caller then runs the full detection
and containment (the reconcile pass), which never trusts the watch's view.

Measured on ibsim (tests/e2e/test_attack_drills.py): one pass over a 64-port sample with
the batch reader takes a few milliseconds.

While the driver applies (its OpenSM reloads and sweeps, then the apply's verify reads every
changed port through the same reader), a pass steps aside and repeats its last answer: the
verify would otherwise wait for the watch's read, whose SMPs are slow during the sweep (a
served move's apply took up to twice the same apply without the watch). It steps aside for at
most :data:`MAX_YIELD` s since its last real pass, so back-to-back applies never blind it longer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.drivers.opensm.smpread import SmpQuery, SmpReader
from gpufabric.fabrics.infiniband.readers.diags import PortInfo
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import CaPort
from gpufabric.fabrics.infiniband.state import SmSeen, SmState

DEFAULT_SAMPLE = 64
MAX_YIELD = 2.0  # s: the longest a watch steps aside for the driver's applies (see module docstring)


@dataclass(frozen=True)
class Suspicion:
    reason: str
    lid: int

    def __str__(self) -> str:
        return f"{self.reason} (lid {self.lid})"


def suspicions(
    trusted_lids: Iterable[int], master: object, ports: Sequence[tuple[CaPort, object]]
) -> tuple[Suspicion, ...]:
    """What one watch pass saw that the trusted master alone would not explain (pure).
    ``master``: the SMInfo reply of the trusted master's LID (an SmSeen, or an error);
    ``ports``: (port, its PortInfo reply or an error)."""
    ok = frozenset(trusted_lids)
    out: dict[tuple[str, int], Suspicion] = {}

    def add(reason: str, lid: int) -> None:
        out.setdefault((reason, lid), Suspicion(reason, lid))

    if not isinstance(master, SmSeen):
        add("the trusted master does not answer SMInfo", min(ok, default=0))
    elif master.state is not SmState.MASTER:
        add(f"the trusted SM is {master.state.value}, not master", master.lid)
    for p, info in ports:
        if not isinstance(info, PortInfo):
            continue  # a port that does not answer now is the reconcile's business
        if info.sm_lid and info.sm_lid not in ok:
            add("a port names another master SM", info.sm_lid)
        if info.is_sm and p.lid not in ok:
            add("an SM runs on a port that is not a trusted SM's", p.lid)
    return tuple(sorted(out.values(), key=lambda s: (s.lid, s.reason)))


class WatchedSm(Protocol):
    """What the watch needs of the OpenSM driver: its discovered ports and its SMP reader."""

    reader: SmpReader

    def ports(self) -> Mapping[Guid, CaPort]: ...


class SmWatch:
    """The watch over one OpenSM driver's subnet (see module docstring)."""

    def __init__(
        self,
        driver: WatchedSm,
        trusted: Iterable[Guid],
        sample: int = DEFAULT_SAMPLE,
        max_yield: float = MAX_YIELD,
        applying: Callable[[], bool] = lambda: False,
    ) -> None:
        """``applying()``: whether the driver applies now (a write to the SM's partitions)."""
        self.driver = driver
        self.applying = applying
        self.trusted = frozenset(trusted)
        self.sample = max(1, sample)
        self.max_yield = max_yield
        self._next = 0
        self._last: tuple[Suspicion, ...] = ()
        self._last_at = float("-inf")  # monotonic time of the last real pass
        self.yielded = 0  # passes that stepped aside for an apply (tests, metrics)

    def check(self) -> tuple[Suspicion, ...]:
        """One pass; while the driver applies (and the last real pass is under ``max_yield`` s
        old), the last pass's answer again, without a read."""
        if self.applying() and time.monotonic() - self._last_at < self.max_yield:
            self.yielded += 1
            return self._last
        self._last = self._check()
        self._last_at = time.monotonic()
        return self._last

    def _check(self) -> tuple[Suspicion, ...]:
        ports = self.driver.ports()
        trusted_lids = sorted(p.lid for g, p in ports.items() if g in self.trusted)
        others = sorted((p for g, p in ports.items() if g not in self.trusted), key=lambda p: p.guid)
        n = min(self.sample, len(others))
        start = self._next % len(others) if others else 0
        picked = [others[(start + i) % len(others)] for i in range(n)]
        self._next = start + n
        master_lid = trusted_lids[0] if trusted_lids else 0
        queries = ([SmpQuery("sminfo", master_lid)] if master_lid else []) + [
            SmpQuery("portinfo", p.lid, p.port_num) for p in picked
        ]
        replies = self.driver.reader.read(queries)
        master = replies[0] if master_lid else None
        infos = replies[1:] if master_lid else replies
        return suspicions(trusted_lids, master, list(zip(picked, infos, strict=True)))
