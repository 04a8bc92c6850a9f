"""An in-memory NVLink driver: every node's Fabric Manager held as the lab stand-in's state
(``gpufabric.lab.fmpm_standin``: FM's rules, -7 in use, -4 inactive, -1 unknown id), read
through the product's own fmpm readers, behind the NVLink driver contract
(``fabrics/nvlink/drivers/base.py``).

It is the contract suite's second implementation (tests/fabrics/nvlink/contract/test_nvlink_driver_contract.py):
what passes for it and for the fmpm driver over the stand-in is the contract, not fmpm's.
``fms`` is shared with the test, which changes an FM behind the driver's back (by hand,
restarted: active set forgotten, gone: ``None``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableMapping
from typing import Any, ClassVar

from gpufabric.domain.errors import ConfigError
from gpufabric.fabrics.nvlink.drivers.base import DOMAINS, FAILED_DEVICES, REPLAY, UNSUPPORTED, FmCallError, FmDriver
from gpufabric.fabrics.nvlink.readers.fmpm import (
    FailedDevice,
    parse_failed_devices,
    parse_partition_list,
    parse_unsupported,
)
from gpufabric.fabrics.nvlink.readers.fmreturn import FmReturn
from gpufabric.fabrics.nvlink.state import NodeFm
from gpufabric.lab import fmpm_standin as fm

State = dict[str, Any]


class MemoryFm(FmDriver):
    """In-memory Fabric Managers (node -> stand-in state; None: FM not running)."""

    capabilities: ClassVar[frozenset[str]] = frozenset({REPLAY, UNSUPPORTED, FAILED_DEVICES, DOMAINS})

    def __init__(self, fms: MutableMapping[str, State | None]) -> None:
        self.fms = fms

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted(self.fms))

    @property
    def smi_nodes(self) -> tuple[str, ...]:
        return self.nodes

    def _state(self, node: str, what: str) -> State:
        if node not in self.fms:
            raise ConfigError("nvlink.options.fm", node, f"a Fabric Manager for node {node} ({', '.join(self.nodes)})")
        state = self.fms[node]
        if state is None:
            r = FmReturn.CONNECTION_NOT_VALID
            raise FmCallError(
                f"{node}: {what}: no Fabric Manager (FM_ST_{r.name}: {r.label})",
                node=node,
                fm_code=int(r),
                command=what,
            )
        return state

    def _call(self, node: str, what: str, fn: Callable[[State, Any], FmReturn], arg: Any) -> None:
        rc = fn(self._state(node, what), arg)
        if rc is not FmReturn.SUCCESS:
            raise FmCallError(
                f"{node}: {what}: FM answered {int(rc)} (FM_ST_{rc.name}: {rc.label})",
                node=node,
                fm_code=int(rc),
                command=what,
            )

    def list_partitions(self, node: str) -> NodeFm:
        return parse_partition_list(fm.render_list(self._state(node, "list partitions")), node)

    def activate(self, node: str, partition: int) -> None:
        self._call(node, f"activate partition {partition}", fm.activate, partition)

    def deactivate(self, node: str, partition: int) -> None:
        self._call(node, f"deactivate partition {partition}", fm.deactivate, partition)

    def set_activated(self, node: str, partitions: Iterable[int]) -> None:
        ids = list(partitions)
        self._call(node, f"set activated partitions {','.join(map(str, ids))}", fm.set_activated, ids)

    def unsupported(self, node: str) -> frozenset[int]:
        return frozenset(p.id for p in parse_unsupported(fm.render_unsupported(self._state(node, "list unsupported"))))

    def failed_devices(self, node: str) -> tuple[FailedDevice, ...]:
        return parse_failed_devices(fm.render_failed(self._state(node, "list failed devices")))

    def smi_q(self, node: str) -> str:
        return fm.render_smi_q(self._state(node, "nvidia-smi -q"))

    def describe(self) -> dict[str, Any]:
        return {"driver": "memory", "nodes": list(self.nodes)}
