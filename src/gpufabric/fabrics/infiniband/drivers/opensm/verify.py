"""Verifying an apply by SMP: each port's real PKey table against what a layout implies.

:func:`mismatches` reads the ports' tables (one batch through the driver's reader) and returns
the ports that differ, with the tables read (their capacity is what the next plan is checked
against). :func:`wait_verified` repeats the read of the ports still wrong until none is, or
raises :class:`~gpufabric.domain.errors.VerifyError` at the deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from gpufabric.domain.errors import GpufabricError, VerifyError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.drivers.opensm.smpread import SmpReader, read_pkeys
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import CaPort
from gpufabric.fabrics.infiniband.state import PartitionLayout, PkeyTable

FABRIC = "infiniband"


def mismatches(
    reader: SmpReader, layout: PartitionLayout, ports: Sequence[CaPort], expected: Mapping[Guid, frozenset[int]]
) -> tuple[dict[str, str], dict[Guid, PkeyTable]]:
    """({guid: "have [...] want [...]"} of the ports whose table differs, the tables read)."""
    reads = read_pkeys(reader, ports)
    default = frozenset({0x7FFF} if layout.default_limited_all else ())
    out: dict[str, str] = {}
    tables: dict[Guid, PkeyTable] = {}
    for p, r in zip(ports, reads, strict=True):
        want = expected.get(p.guid, default)
        if isinstance(r, GpufabricError):
            out[str(p.guid)] = f"unreadable: {r.message}"
            continue
        tables[p.guid] = PkeyTable(p.guid, r.entries, r.capacity, p.lid)
        if frozenset(r.entries) != want or len(r.entries) != len(set(r.entries)):
            out[str(p.guid)] = f"have {hexes(r.entries)} want {hexes(sorted(want))}"
    return out, tables


def wait_verified(check: Callable[[list[CaPort]], dict[str, str]], ports: Sequence[CaPort], timeout: float) -> None:
    """``check`` the ports still wrong every 0.1 s until none is; VerifyError after ``timeout``."""
    deadline = time.monotonic() + timeout
    todo = list(ports)
    while True:
        bad = check(todo)
        if not bad:
            return
        if time.monotonic() > deadline:
            raise VerifyError(
                f"{len(bad)} port(s) do not hold the expected PKeys after {timeout}s: "
                + "; ".join(f"{g} {m}" for g, m in list(bad.items())[:3]),
                fabric=FABRIC,
                mismatches=[f"{g} {m}" for g, m in bad.items()],
            )
        todo = [p for p in todo if str(p.guid) in bad]
        time.sleep(0.1)


def hexes(v: Sequence[int] | tuple[int, ...]) -> str:
    return "[" + " ".join(f"0x{x:04x}" for x in v) + "]"
