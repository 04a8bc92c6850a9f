"""An in-memory subnet manager with OpenSM's semantics, for tests without ibsim.

Every port of the (fixed) fabric holds the table ``expected_tables(layout)`` gives it once a
layout is applied (tenant partitions, the default partition limited for hosts and full for
``default_full``). A layout is checked like OpenSM's driver checks it (``check_layout``:
reserved/duplicate PKeys, names, table capacity) and a GUID not on the fabric is refused
(``require_present``), before anything changes. ``apply`` returns the read-back of the ports
whose table changed. ``faults`` injects errors; ``set_table`` injects drift.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from gpufabric.domain.errors import FabricError
from gpufabric.domain.values import DEFAULT_PKEY, Guid
from gpufabric.fabrics.infiniband.drivers.base import SubnetManagerDriver
from gpufabric.fabrics.infiniband.plan import expected_tables
from gpufabric.fabrics.infiniband.state import IbFabricState, PartitionLayout, PkeyTable, SmSeen, SmState
from gpufabric.fabrics.infiniband.state.partitions import check_layout, layout_guids

from support.memfabric.faults import Faults

CAPACITY = 16


def _guids(raw: Iterable[object], field: str) -> tuple[Guid, ...]:
    return tuple(g if isinstance(g, Guid) else Guid.parse(str(g), field=field) for g in raw)


class MemorySubnetManager(SubnetManagerDriver):
    """``MemorySubnetManager(ports=[guid, ...], trusted_sm_guids=[guid])``: the trusted SM's
    ports are part of the fabric and start as full default members, hosts as limited."""

    def __init__(
        self, ports: Iterable[object] = (), trusted_sm_guids: Iterable[object] = (), capacity: int = CAPACITY
    ) -> None:
        self.trusted_sm_guids = _guids(trusted_sm_guids, "trusted_sm_guids")
        self.capacity = capacity
        self._lock = threading.Lock()
        every = sorted(set(_guids(ports, "ports")) | set(self.trusted_sm_guids))
        start = PartitionLayout(default_full=self.trusted_sm_guids)
        want = expected_tables(start, every)
        self._tables = {g: tuple(sorted(want[g])) for g in every}
        self.faults = Faults()
        self.applies = 0
        self.layout: PartitionLayout | None = None

    def observe(self) -> IbFabricState:
        with self._lock:
            tables = tuple(PkeyTable(g, e, self.capacity) for g, e in sorted(self._tables.items()))
        sms = tuple(SmSeen(g, 1, 15, SmState.MASTER) for g in self.trusted_sm_guids[:1])
        return IbFabricState(tables, sms, self.trusted_sm_guids[0] if self.trusted_sm_guids else None)

    def apply(self, layout: PartitionLayout) -> Sequence[PkeyTable]:
        new = check_layout(layout, self.trusted_sm_guids, {}, self.capacity)
        with self._lock:
            missing = sorted(layout_guids(new) - self._tables.keys())
            if missing:
                raise FabricError(
                    f"{len(missing)} port GUID(s) of the layout are not on the fabric: {', '.join(map(str, missing[:5]))}",
                    fabric="infiniband",
                    missing=[str(g) for g in missing],
                )
            self.faults.check(layout)
            want = expected_tables(new, self._tables)
            changed = sorted(g for g, e in want.items() if frozenset(self._tables[g]) != e)
            for g in changed:
                self._tables[g] = tuple(sorted(want[g]))
            self.layout = new
            self.applies += 1
            return tuple(PkeyTable(g, self._tables[g], self.capacity) for g in changed)

    def set_table(self, guid: Guid, entries: Iterable[int]) -> None:
        """Change one port's table out of band (drift injected by a test)."""
        with self._lock:
            self._tables[guid] = tuple(sorted(set(entries)))

    @staticmethod
    def default_entry() -> int:
        return DEFAULT_PKEY
