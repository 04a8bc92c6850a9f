"""The NVLink :class:`FabricKind` (pure): desired slice from the tenancy, diff into partition
(de)activations, previews, merge, ownership and audit.

Desired state holds, per node with GPUs in the inventory, *who* wants *how many* GPUs (the
kind's lease term :data:`GPUS`, ``lease.term("gpus")``; unset = every GPU of the node =
partition 0 on HGX 8-GPU; quarantine = 0), not partition ids: the diff picks concrete ids
against the observed state with
:func:`~gpufabric.fabrics.nvlink.plan.assign`, which keeps an active partition that still
fits the lease. So desired is deterministic and stable, and a move of a node deactivates its
old partition (removal phase) before it activates the new one (addition phase).

``fabrics.yaml`` section (see docs/nvlink.md)::

    nvlink:
      driver: fmpm
      options: {fmpm: /usr/bin/fmpm, fm: {gpu-a01: "unix:/run/nvidia-fabricmanager/fm.sock"}}

The baseboard table used before a node is read comes from the deployment setting
``nvlink_baseboard`` (default ``hgx-h100-8gpu``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Final

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.fabric import DriverLookup, FabricBackend, FabricKind, FabricPlan, InvariantSpec, Tenancy
from gpufabric.domain.findings import Violation
from gpufabric.domain.hooks import ImportFormat
from gpufabric.domain.models import QUARANTINE, Node
from gpufabric.domain.moves import MoveRequest
from gpufabric.domain.terms import TermSpec
from gpufabric.domain.views import CliGroup
from gpufabric.fabrics.nvlink import audit as nvaudit
from gpufabric.fabrics.nvlink.entries import Gpu, dump_gpus, node_domain, node_gpus, parse_gpus
from gpufabric.fabrics.nvlink.plan import NvlinkPlan, PartitionChange, allocate, slot_partition, targets
from gpufabric.fabrics.nvlink.segments import DEFAULT_BOARD, MAX_GPUS, Partition, table
from gpufabric.fabrics.nvlink.state import FABRIC, NodeFm, NodeWant, NvlinkDesired, NvlinkState, SlotWant

BOARD_SETTING = "nvlink_baseboard"
GPUS: Final = TermSpec(
    "gpus", 1, MAX_GPUS, f"1-{MAX_GPUS} GPUs, or unset for the whole node",
    "GPUs of the node (an NVLink partition); default all",
)  # fmt: skip
"""The kind's lease term: how many of the node's GPUs a lease holds (unset: all of them), at
most Fabric Manager's FM_MAX_NUM_GPUS per partition. Its name is the API bodies' and answers'
``gpus`` field and the CLI's ``--gpus``."""


def lease_gpus(node: Node, gpus: int | None, board: str = DEFAULT_BOARD) -> int:
    """The GPU count a lease of ``node`` asks for (None: all its GPUs), checked against the
    baseboard's partitions and the node's GPUs in the inventory (ValidationError naming
    ``gpus`` and listing what is possible). For the CLI/API at lease creation."""
    mine = node_gpus(node)
    if not mine:
        if gpus is None:
            return 0
        raise ValidationError("gpus", gpus, "none (node has no GPUs in the inventory)", f"node {node.name}")
    k = len(mine) if gpus is None else gpus
    parts = table(board)
    mids = frozenset(g.module_id.value for g in mine)
    every = frozenset().union(*(p.gpus for p in parts))
    allocate(parts, k, unavailable=every - mids, where=f"node {node.name}")
    return k


class NvlinkKind(FabricKind[NvlinkDesired, NvlinkState]):
    name: ClassVar[str] = FABRIC
    ports_section = True
    inventory_key: ClassVar[str | None] = "gpus"
    lease_terms: ClassVar[tuple[TermSpec, ...]] = (GPUS,)

    # ---- its column of the inventory (the generic port table; entries.py)
    def parse_ports(self, node: str, raw: Any, where: str) -> tuple[Gpu, ...]:
        return parse_gpus(node, raw, where)

    def dump_ports(self, ports: tuple[Any, ...]) -> list[Any]:
        return dump_gpus(ports)

    def import_formats(self) -> Sequence[ImportFormat]:
        """``inventory import --format nvidia-smi``: each node's NVLink domain (:mod:`inventory`, imported only then)."""
        from gpufabric.fabrics.nvlink.inventory import import_format

        return (import_format(),)

    def check_request(self, node: Node, request: MoveRequest) -> None:
        """A GPU count (:data:`GPUS`) must be one the node has: 1 to its GPUs in the inventory."""
        want = request.term(GPUS.name)
        if want is None or request.to_tenant == QUARANTINE:
            return
        if node.host:  # a slot: its GPUs were fixed when it was carved
            if want != len(node.slot_modules):
                raise ValidationError(GPUS.name, want, f"{len(node.slot_modules)} (the GPUs of slot {node.name}), or unset")
            return
        count = len(node_gpus(node, self.instance))
        if not count:
            raise ValidationError(GPUS.name, want, f"unset (node {node.name} has no GPUs in the inventory)")
        if not 1 <= want <= count:
            raise ValidationError(GPUS.name, want, f"1-{count} (the GPUs of node {node.name}), or unset for all")

    def build(self, section: Any, drivers: DriverLookup, settings: Mapping[str, Any]) -> FabricBackend[NvlinkState]:
        """The backend the section names (:func:`backend.build_backend`, imported only then: listing
        nodes loads no driver)."""
        from gpufabric.fabrics.nvlink.backend import build_backend

        return build_backend(section, drivers)

    # ---- desired state and plan
    def desired(self, tenancy: Tenancy) -> NvlinkDesired:
        parts = table(str(tenancy.settings.get(BOARD_SETTING, DEFAULT_BOARD)))
        wants: dict[str, NodeWant] = {}
        for node in tenancy.nodes:
            mine = node_gpus(node, self.instance)
            if not mine:
                continue  # slot nodes too: they hold no ports, their host's want carries them
            mids = frozenset(g.module_id.value for g in mine)
            lease = tenancy.owners.get(node.name)
            if lease is None:
                wants[node.name] = NodeWant(node.name, QUARANTINE, 0, parts, mids)
            elif tenancy.shared(node.name):
                slots = tuple(
                    sorted(SlotWant(s.name, tenancy.owner(s.name), frozenset(s.slot_modules))
                           for s in tenancy.slots_of(node.name))
                )  # fmt: skip
                wants[node.name] = NodeWant(node.name, lease.tenant, 0, parts, mids, shared=True, slots=slots)
            else:
                want = lease.term(GPUS.name)
                k = len(mine) if want is None else want
                wants[node.name] = NodeWant(node.name, lease.tenant, k, parts, mids)
        return NvlinkDesired(wants)

    def diff(self, desired: NvlinkDesired, observed: NvlinkState) -> FabricPlan:
        """Per node: deactivate every active partition that is not a target, activate every
        target that is not active (:func:`targets`: one per live slot on a shared host, so a
        slot's move changes its own partition only). The backend runs removals first."""
        changes: list[PartitionChange] = []
        for name in sorted(desired.nodes):
            want, fm = desired.nodes[name], observed.nodes.get(name)
            goal = targets(want, fm)
            keep = {p.id for p, _ in goal}
            for p in fm.active_partitions() if fm is not None else ():
                if p.id not in keep:
                    changes.append(PartitionChange(name, False, p.id, tuple(sorted(p.gpus)), slot=_slot(want, p)))
            for p, tenant in goal:
                if fm is None or p.id not in fm.active:
                    changes.append(PartitionChange(name, True, p.id, tuple(sorted(p.gpus)), tenant, _slot(want, p)))
        return NvlinkPlan(tuple(changes))

    def as_observed(self, desired: NvlinkDesired) -> NvlinkState:
        return NvlinkState({name: NodeFm(name, want.partitions, active_set(want)) for name, want in desired.nodes.items()})

    def active_set(self, desired: NvlinkDesired, node: str) -> frozenset[int]:
        """The partition ids ``node``'s FM should have active now (on a shared host: those of
        all its live slots): what :meth:`FmBackend.replay <gpufabric.fabrics.nvlink.backend.FmBackend.replay>`
        sends a restarted FM that the backend has no verified set for."""
        want = desired.nodes.get(node)
        return active_set(want) if want is not None else frozenset()

    def empty_state(self) -> NvlinkState:
        return NvlinkState()

    def merge(self, observed: NvlinkState, read_back: NvlinkState) -> NvlinkState:
        return NvlinkState({**observed.nodes, **read_back.nodes})

    def tenants_seen(self, observed: NvlinkState, tenancy: Tenancy) -> Mapping[str, frozenset[str]]:
        """A node with an active partition is seen as its current owner's (FM keeps no tenant
        labels; a partition that should not be active is the audit's to report). On a shared
        host each active partition's GPUs are seen as their slots' owners', by slot name (a GPU
        of no slot: the host's, in quarantine)."""
        out: dict[str, set[str]] = {}
        for name, fm in observed.nodes.items():
            if not fm.active:
                continue
            if not tenancy.shared(name):
                out.setdefault(name, set()).add(tenancy.owner(name))
                continue
            for p in fm.active_partitions():
                for g in p.gpus:
                    unit = tenancy.gpu_unit(name, g)
                    out.setdefault(unit or name, set()).add(tenancy.owner(unit) if unit else QUARANTINE)
        return {n: frozenset(t) for n, t in out.items()}

    # ---- slots of shared hosts (issue 33)
    def slot_modules(self, host: Node, k: int, taken: Collection[int]) -> frozenset[int] | None:
        """The allocator's partition for a slot of ``k`` GPUs of ``host`` (:func:`allocate`: none
        of ``taken``, only GPUs in the inventory, keeping larger partitions free); None when the
        host has no GPUs on this instance. Refusal: ValidationError naming ``gpus`` and what is free."""
        mine = node_gpus(host, self.instance)
        if not mine:
            return None
        parts = table(DEFAULT_BOARD)
        every = frozenset().union(*(p.gpus for p in parts))
        mids = frozenset(g.module_id.value for g in mine)
        got = allocate(parts, k, busy=taken, unavailable=every - mids, where=f"node {host.name}")
        return got.gpus

    def check_slot(self, host: Node, modules: frozenset[int]) -> None:
        """A slot's GPUs must be in ``host``'s inventory and be exactly one partition of the board."""
        mine = node_gpus(host, self.instance)
        if not mine:
            return
        mids = frozenset(g.module_id.value for g in mine)
        where = f"a slot of node {host.name}"
        if missing := sorted(set(modules) - mids):
            raise ValidationError("gpus", sorted(modules), f"GPUs of node {host.name} ({_ids(mids)})",
                                  f"{where}: GPUs {_ids(missing)} are not in the inventory")  # fmt: skip
        parts = table(DEFAULT_BOARD)
        if slot_partition(parts, modules) is None:
            raise ValidationError("gpus", sorted(modules), "the GPUs of one partition: " + ", ".join(map(str, parts)),
                                  f"{where}: GPUs {_ids(modules)} are no partition of the board")  # fmt: skip

    # ---- audit
    def invariants(self) -> tuple[InvariantSpec, ...]:
        return nvaudit.INVARIANTS

    def audit(self, tenancy: Tenancy, desired: NvlinkDesired, observed: NvlinkState) -> Iterable[Violation]:
        return list(nvaudit.audit(desired, observed))

    # ---- display
    def summary(self, node: Node, tenancy: Tenancy | None = None) -> str:
        """``K/N GPUs``: the size of the partition the node's lease holds (0 in quarantine) of
        its N GPUs; ``N GPUs`` when who holds it is unknown; a second line names the multi-node
        NVLink domain its GPUs reported (none for a node that is its own board's)."""
        mine = node_gpus(node, self.instance)
        if node.host and tenancy is not None:  # a slot: its host's partition of its GPUs
            row = slot_row(node, tenancy)
            return f"{len(node.slot_modules)} GPUs, partition {row['partition']}" if row and row["partition"] is not None else ""
        if not mine:
            return ""
        k = partition_gpus(node, tenancy)
        cell = f"{len(mine)} GPUs" if k is None else f"{k}/{len(mine)} GPUs"
        if tenancy is not None and tenancy.shared(node.name):
            rows = slot_rows(node.name, tenancy)
            live = [r for r in rows if r["tenant"] != QUARANTINE]
            cell = f"{sum(len(r['gpus']) for r in live)}/{len(mine)} GPUs in {len(live)} slots"
        domain = node_domain(node.name, mine)
        return cell if domain.source == "board" else f"{cell}\nNVLink domain {domain.id}"

    def node_view(self, node: Node, tenancy: Tenancy | None = None) -> Mapping[str, Any]:
        """The node's GPUs, ``partition_gpus``, the size of the NVLink partition its lease holds
        (0: none, in quarantine; null: unknown), and ``nvlink_domain`` (null without GPUs): the
        NVLink domain its GPUs reported (``id``, ``cluster_uuid``, ``clique_id``, source
        ``nvidia-smi``) or, none recorded, its own board (source ``board``, id ``board:<node>``),
        one value per node that its slots share. The partition id is the diff's to pick against
        Fabric Manager, so it is not shown here. A shared host (issue 33) adds ``slots``: each slot's
        ``slot`` name, ``partition`` (the board's partition of exactly its GPUs, null: none),
        ``gpus`` and ``tenant`` (quarantine: not live); its own lease holds no partition."""
        mine = node_gpus(node, self.instance)
        view: dict[str, Any] = {
            "gpus": [{"module_id": g.module_id.value, "pci_bus_id": g.pci_bus_id} for g in mine],
            "partition_gpus": partition_gpus(node, tenancy) if mine else 0,
            "nvlink_domain": node_domain(node.name, mine).to_dict() if mine else None,
        }
        if mine and tenancy is not None and tenancy.shared(node.name):
            view["slots"] = slot_rows(node.name, tenancy)
        elif node.host and tenancy is not None and (row := slot_row(node, tenancy)):
            view["slots"] = [row]
            view["partition_gpus"] = len(node.slot_modules) if row["tenant"] != QUARANTINE else 0
        return view

    def cli_group(self) -> CliGroup:
        """``gpufabric nvlink domains`` (:mod:`views`)."""
        from gpufabric.fabrics.nvlink.views import cli_group

        return cli_group()


def partition_gpus(node: Node, tenancy: Tenancy | None) -> int | None:
    """GPUs of the partition the lease of ``node`` holds in ``tenancy`` (0: in quarantine, or a
    shared host, whose own lease holds none)."""
    if tenancy is None:
        return None
    lease = tenancy.owners.get(node.name)
    if lease is None or tenancy.shared(node.name):
        return 0
    want = lease.term(GPUS.name)
    return len(node_gpus(node)) if want is None else want


def slot_rows(host: str, tenancy: Tenancy) -> list[dict[str, Any]]:
    """The slots of shared host ``host``: name, the board's partition of exactly its GPUs, GPUs, owner."""
    parts = table(str(tenancy.settings.get(BOARD_SETTING, DEFAULT_BOARD)))
    rows: list[dict[str, Any]] = []
    for s in tenancy.slots_of(host):
        p = slot_partition(parts, s.slot_modules)
        rows.append({"slot": s.name, "partition": p.id if p else None, "gpus": sorted(s.slot_modules),
                     "tenant": tenancy.owner(s.name)})  # fmt: skip
    return rows


def slot_row(slot: Node, tenancy: Tenancy) -> dict[str, Any] | None:
    """The row of slot node ``slot`` (None: its host is not shared now, the slot holds no partition)."""
    if not tenancy.shared(slot.host):
        return None
    return next((r for r in slot_rows(slot.host, tenancy) if r["slot"] == slot.name), None)


def active_set(want: NodeWant) -> frozenset[int]:
    """The partition ids ``want`` has active once converged (none when nothing fits)."""
    try:
        return frozenset(p.id for p, _ in targets(want, None))
    except ValidationError:
        return frozenset()


def _slot(want: NodeWant, p: Partition) -> str:
    """The slot of shared host ``want`` whose GPUs are exactly ``p``'s ("" none, or not shared)."""
    return next((s.name for s in want.slots if s.modules == p.gpus), "")


def _ids(modules: Iterable[int]) -> str:
    return ",".join(map(str, sorted(modules)))
