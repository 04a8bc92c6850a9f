"""An in-memory NVLink driver: every node's Fabric Manager held as the lab stand-in's state
(``gpufabric.lab.fmpm_standin``: FM's rules, -7 in use, -4 inactive, -1 unknown id), read
through the product's own fmpm readers, behind the NVLink driver contract
(``fabrics/nvlink/drivers/base.py``).

It is the contract suite's second implementation (tests/contract/test_nvlink_driver_contract.py):
what passes for it and for the fmpm driver over the stand-in is the contract, not fmpm's.
``fms`` is shared with the test, which changes an FM behind the driver's back (by hand,
restarted: active set forgotten, gone: ``None``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableMapping
from typing import Any, ClassVar

from gpufabric.domain.errors import ConfigError, VerifyError
from gpufabric.domain.fabric import FabricPlan
from gpufabric.fabrics.nvlink.drivers.base import DOMAINS, FAILED_DEVICES, REPLAY, FmCallError, NvlinkDriver
from gpufabric.fabrics.nvlink.entries import NvlinkDomain
from gpufabric.fabrics.nvlink.plan import NvlinkPlan, PartitionChange
from gpufabric.fabrics.nvlink.readers.fmpm import FailedDevice, parse_failed_devices, parse_partition_list
from gpufabric.fabrics.nvlink.readers.fmreturn import FmReturn
from gpufabric.fabrics.nvlink.readers.smi import pdsh_text, smi_domain
from gpufabric.fabrics.nvlink.state import NodeFm, NvlinkState
from gpufabric.lab import fmpm_standin as fm

State = dict[str, Any]


class MemoryFmDriver(NvlinkDriver):
    """NVLink partitions of in-memory Fabric Managers (node -> stand-in state, None: not running)."""

    capabilities: ClassVar[frozenset[str]] = frozenset({"observe", "apply", REPLAY, FAILED_DEVICES, DOMAINS})

    def __init__(self, fms: MutableMapping[str, State | None]) -> None:
        self.fms = fms
        self._verified: dict[str, frozenset[int]] = {}

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted(self.fms))

    @property
    def domain_nodes(self) -> tuple[str, ...]:
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

    def read_node(self, node: str, *, health: bool = True) -> NodeFm:
        return parse_partition_list(fm.render_list(self._state(node, "list partitions")), node)

    def failed_devices(self, node: str) -> tuple[FailedDevice, ...]:
        return parse_failed_devices(fm.render_failed(self._state(node, "list failed devices")))

    def observe(self) -> NvlinkState:
        nodes = {n: self.read_node(n) for n in self.nodes}
        self._verified.update({n: f.active for n, f in nodes.items()})
        return NvlinkState(nodes)

    def _change(self, c: PartitionChange) -> bool:
        """Run one change; True when FM refused it with the idempotent code (-7 / -4)."""
        what = f"{'activate' if c.activate else 'deactivate'} partition {c.partition}"
        try:
            self._call(c.node, what, fm.activate if c.activate else fm.deactivate, c.partition)
        except FmCallError as e:
            if e.fm_code == (FmReturn.IN_USE if c.activate else FmReturn.UNINITIALIZED):
                return True
            raise
        return False

    def apply(self, plan: FabricPlan) -> NvlinkState:
        if not isinstance(plan, NvlinkPlan):
            raise ConfigError("nvlink.plan", type(plan).__name__, "an NvlinkPlan")
        for n in plan.nodes():
            self._state(n, "apply")
        removals, additions = plan.split()
        tolerated = [c for c in (*removals.changes, *additions.changes) if self._change(c)]
        back = {n: self.read_node(n) for n in plan.nodes()}
        for c in plan.changes:
            if (c.partition in back[c.node].active) != c.activate:
                want = "active" if c.activate else "inactive"
                if c in tolerated:
                    r = FmReturn.IN_USE if c.activate else FmReturn.UNINITIALIZED
                    raise FmCallError(f"{c.node}: partition {c.partition} is not {want}: FM answered {int(r)} ({r.label})",
                                      node=c.node, fm_code=int(r), command=c.line())  # fmt: skip
                raise VerifyError(
                    f"{c.node}: partition {c.partition} read back not {want}", fabric="nvlink", device=c.node
                )
        self._verified.update({n: f.active for n, f in back.items()})
        return NvlinkState(back)

    def replay(self, node: str, partitions: Iterable[int] | None = None) -> NodeFm:
        ids = sorted(set(self._verified.get(node, frozenset()) if partitions is None else partitions))
        if ids:
            self._call(node, f"set activated partitions {','.join(map(str, ids))}", fm.set_activated, ids)
        back = self.read_node(node)
        if back.active != frozenset(ids):
            raise VerifyError(
                f"{node}: active partitions {sorted(back.active)} after replaying {ids}", fabric="nvlink", device=node
            )
        self._verified[node] = back.active
        return back

    def domains(self) -> dict[str, NvlinkDomain]:
        return {n: smi_domain(n, fm.render_smi_q(self._state(n, "nvidia-smi -q"))) for n in self.nodes}

    def domains_text(self) -> str:
        return pdsh_text([(n, fm.render_smi_q(self._state(n, "nvidia-smi -q"))) for n in self.nodes])

    def describe(self) -> dict[str, Any]:
        return {"driver": "memory", "nodes": list(self.nodes)}
