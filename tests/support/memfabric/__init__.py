"""In-memory fakes of every fabric kind, for tests that need no root and no real device.

* :class:`MemorySwitchDriver` (``mem-switch``): an :class:`EthernetSwitchDriver` holding its
  ports in a dict; passes the Ethernet contract (tests/fabrics/ethernet/contract/test_ethernet_contract.py).
* :class:`MemorySubnetManager` (``mem-sm``): a :class:`SubnetManagerDriver` with OpenSM's
  semantics (every port's table becomes ``expected_tables(layout)``); passes the SM contract.
* :class:`MemoryKind` (fabric ``memory``) with its backend (``mem-tags``): a small TEST FABRIC
  KIND — one string tag (the owning tenant, or quarantine) per node port — that plugs into
  the core with no edit outside this folder: :func:`register` is all the wiring it needs;
  ``register(reg, inventory=True)`` makes it own its whole column through the generic seams
  (inventory section, segment, audit, API fragment, table cell: ``column.py``).

These are doubles of the drivers' *contracts*, not of any vendor device.
"""

from __future__ import annotations

from support.memfabric.ethernet import MemorySwitchDriver
from support.memfabric.faults import Faults
from support.memfabric.kind import DRIFT_ID as DRIFT_ID_MEMORY
from support.memfabric.kind import MemoryBackend, MemoryKind, MemoryPlan, MemState
from support.memfabric.sm import MemorySubnetManager

__all__ = [
    "DRIFT_ID_MEMORY",
    "Faults",
    "MemState",
    "MemoryBackend",
    "MemoryKind",
    "MemoryPlan",
    "MemorySubnetManager",
    "MemorySwitchDriver",
    "register",
]


def register(registry: object, inventory: bool = False) -> None:
    """Register the memory fabric kind and the three in-memory drivers on a service
    ``Registry`` (``register_kind`` / ``register``): the only wiring the memory fabric needs.
    ``inventory``: the kind owns its whole column (ports from the inventory's generic section,
    a segment per network, an API fragment and a table cell; :mod:`support.memfabric.column`)."""
    registry.register_kind(MemoryKind(inventory=inventory))  # type: ignore[attr-defined]
    registry.register("mem-switch", MemorySwitchDriver)  # type: ignore[attr-defined]
    registry.register("mem-sm", MemorySubnetManager)  # type: ignore[attr-defined]
    registry.register("mem-tags", MemoryBackend)  # type: ignore[attr-defined]
