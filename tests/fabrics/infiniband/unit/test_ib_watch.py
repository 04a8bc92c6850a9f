"""The rogue-SM watch: what one cheap pass suspects (pure), the sample rotation, and the
serve loop's trigger (wake reconcile at once, a standing decoy only every cooldown)."""

from __future__ import annotations

from collections.abc import Sequence

from gpufabric.domain.errors import FabricError, GpufabricError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.drivers.opensm.smpread import SmpQuery, SmpValue
from gpufabric.fabrics.infiniband.drivers.opensm.watch import SmWatch, suspicions
from gpufabric.fabrics.infiniband.readers.diags import PortInfo
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import CaPort
from gpufabric.fabrics.infiniband.state import SmSeen, SmState
from gpufabric.runtime.loops import RogueWatch

SM = Guid(0x0002C90310000001)
P = [CaPort(Guid(0x0002C90310000101 + (i << 8)), 10 + i, 1, f"gpu-a{i + 1:02d} mlx5_0", 3, i + 1) for i in range(5)]
SM_PORT = CaPort(SM, 1, 1, "sm-01 mlx5_0", 3, 18)


def info(lid: int, sm_lid: int = 1, is_sm: bool = False) -> PortInfo:
    return PortInfo(lid, sm_lid, 0x2 if is_sm else 0, "Active", "LinkUp")


def test_quiet_fabric_raises_no_suspicion() -> None:
    master = SmSeen(SM, 1, 15, SmState.MASTER)
    assert suspicions([1], master, [(p, info(p.lid)) for p in P]) == ()


def test_rogue_master_named_by_a_port_or_running_on_one() -> None:
    master = SmSeen(SM, 1, 15, SmState.MASTER)  # a rogue with its own sm_key: the trusted one stays MASTER
    got = suspicions([1], master, [(P[0], info(10)), (P[3], info(13, sm_lid=13, is_sm=True))])
    assert [(s.lid, s.reason) for s in got] == [
        (13, "a port names another master SM"),
        (13, "an SM runs on a port that is not a trusted SM's"),
    ]


def test_trusted_master_gone_or_demoted() -> None:
    assert [s.reason for s in suspicions([1], FabricError("x", fabric="infiniband"), [])] == [
        "the trusted master does not answer SMInfo"
    ]
    standby = SmSeen(SM, 1, 15, SmState.STANDBY)
    assert [s.reason for s in suspicions([1], standby, [])] == ["the trusted SM is standby, not master"]


def test_unreadable_port_is_not_a_suspicion() -> None:
    assert (
        suspicions([1], SmSeen(SM, 1, 15, SmState.MASTER), [(P[0], FabricError("timeout", fabric="infiniband"))]) == ()
    )


class FakeReader:
    def __init__(self, rogue_lid: int = 0) -> None:
        self.rogue_lid = rogue_lid
        self.reads: list[list[SmpQuery]] = []

    def read(self, queries: Sequence[SmpQuery]) -> list[SmpValue | GpufabricError]:
        self.reads.append(list(queries))
        out: list[SmpValue | GpufabricError] = []
        for q in queries:
            if q.op == "sminfo":
                out.append(SmSeen(SM, q.lid, 15, SmState.MASTER))
            else:
                out.append(info(q.lid, sm_lid=self.rogue_lid if q.lid == self.rogue_lid else 1))
        return out

    def close(self) -> None:
        pass


class FakeDriver:
    def __init__(self, reader: FakeReader) -> None:
        self.reader = reader

    def ports(self) -> dict[Guid, CaPort]:
        return {p.guid: p for p in [SM_PORT, *P]}


def test_watch_samples_in_one_read_and_rotates() -> None:
    reader = FakeReader(rogue_lid=14)
    w = SmWatch(FakeDriver(reader), [SM], sample=2)  # type: ignore[arg-type]
    seen = [w.check() for _ in range(3)]
    assert [[(q.op, q.lid) for q in r] for r in reader.reads] == [
        [("sminfo", 1), ("portinfo", 10), ("portinfo", 11)],
        [("sminfo", 1), ("portinfo", 12), ("portinfo", 13)],
        [("sminfo", 1), ("portinfo", 14), ("portinfo", 10)],
    ]
    assert [len(s) for s in seen] == [0, 0, 1] and seen[2][0].lid == 14



def test_watch_steps_aside_while_the_driver_applies_for_at_most_max_yield() -> None:
    """While the driver applies (its verify reads through the same SMP reader), a pass sends no
    read and repeats the last answer (a suspicion stays suspected); once its last real pass is
    ``max_yield`` s old it reads again, applying or not."""
    reader = FakeReader(rogue_lid=14)
    busy = [False]
    w = SmWatch(FakeDriver(reader), [SM], sample=5, max_yield=0.2, applying=lambda: busy[0])  # type: ignore[arg-type]
    first = w.check()
    assert len(reader.reads) == 1 and [s.lid for s in first] == [14]
    busy[0] = True
    assert w.check() == first and w.check() == first  # stepped aside: no read
    assert len(reader.reads) == 1 and w.yielded == 2
    import time

    time.sleep(0.25)  # the last real pass is now older than max_yield: read, even while applying
    assert w.check() == first and len(reader.reads) == 2
    busy[0] = False
    w.check()
    assert len(reader.reads) == 3 and w.yielded == 2


class WatchedBackend:
    capabilities = frozenset({"watch"})

    def __init__(self) -> None:
        self.found: tuple[str, ...] = ()

    def watch(self) -> tuple[str, ...]:
        return self.found


def test_watch_wakes_reconcile_at_once_and_a_standing_decoy_only_after_cooldown() -> None:
    wakes: list[int] = []
    w = RogueWatch(lambda: wakes.append(1), cooldown=3600)
    b = WatchedBackend()
    backends = {"infiniband": b, "ethernet": object()}
    assert w.run(backends) == () and wakes == []
    b.found = ("a port names another master SM (lid 999)",)
    assert w.run(backends) == ("infiniband: a port names another master SM (lid 999)",)
    assert len(wakes) == 1 and w.suspected_at is not None
    w.run(backends)  # the same suspicion, within the cooldown: no new pass
    assert len(wakes) == 1
    b.found = ("a port names another master SM (lid 999)", "an SM runs on a port that is not a trusted SM's (lid 13)")
    w.run(backends)  # something new: at once
    assert len(wakes) == 2
    b.found = ()
    w.run(backends)
    assert w.suspected_at is None
