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

from collections.abc import Iterable, Mapping, Sequence
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
from gpufabric.fabrics.nvlink.plan import NvlinkPlan, PartitionChange, allocate, assign
from gpufabric.fabrics.nvlink.segments import DEFAULT_BOARD, MAX_GPUS, table
from gpufabric.fabrics.nvlink.state import FABRIC, NodeFm, NodeWant, NvlinkDesired, NvlinkState

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
                continue
            mids = frozenset(g.module_id.value for g in mine)
            lease = tenancy.owners.get(node.name)
            if lease is None:
                wants[node.name] = NodeWant(node.name, QUARANTINE, 0, parts, mids)
            else:
                want = lease.term(GPUS.name)
                k = len(mine) if want is None else want
                wants[node.name] = NodeWant(node.name, lease.tenant, k, parts, mids)
        return NvlinkDesired(wants)

    def diff(self, desired: NvlinkDesired, observed: NvlinkState) -> FabricPlan:
        changes: list[PartitionChange] = []
        for name in sorted(desired.nodes):
            want = desired.nodes[name]
            fm = observed.nodes.get(name)
            target = assign(want, fm)
            active = fm.active_partitions() if fm is not None else ()
            for p in active:
                if target is None or p.id != target.id:
                    changes.append(PartitionChange(name, False, p.id, tuple(sorted(p.gpus))))
            if target is not None and (fm is None or target.id not in fm.active):
                changes.append(PartitionChange(name, True, target.id, tuple(sorted(target.gpus)), want.tenant))
        return NvlinkPlan(tuple(changes))

    def as_observed(self, desired: NvlinkDesired) -> NvlinkState:
        nodes: dict[str, NodeFm] = {}
        for name, want in desired.nodes.items():
            try:
                target = assign(want, None)
            except ValidationError:
                target = None
            nodes[name] = NodeFm(name, want.partitions, frozenset({target.id}) if target else frozenset())
        return NvlinkState(nodes)

    def empty_state(self) -> NvlinkState:
        return NvlinkState()

    def merge(self, observed: NvlinkState, read_back: NvlinkState) -> NvlinkState:
        return NvlinkState({**observed.nodes, **read_back.nodes})

    def tenants_seen(self, observed: NvlinkState, tenancy: Tenancy) -> Mapping[str, frozenset[str]]:
        """A node with an active partition is seen as its current owner's (FM keeps no tenant
        labels; a partition that should not be active is the audit's to report)."""
        return {name: frozenset({tenancy.owner(name)}) for name, fm in observed.nodes.items() if fm.active}

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
        if not mine:
            return ""
        k = partition_gpus(node, tenancy)
        cell = f"{len(mine)} GPUs" if k is None else f"{k}/{len(mine)} GPUs"
        domain = node_domain(node.name, mine)
        return cell if domain.source == "board" else f"{cell}\nNVLink domain {domain.id}"

    def node_view(self, node: Node, tenancy: Tenancy | None = None) -> Mapping[str, Any]:
        """The node's GPUs, ``partition_gpus``, the size of the NVLink partition its lease holds
        (0: none, in quarantine; null: unknown), and ``nvlink_domain`` (null without GPUs): the
        NVLink domain its GPUs reported (``id``, ``cluster_uuid``, ``clique_id``, source
        ``nvidia-smi``) or, none recorded, its own board (source ``board``, id ``board:<node>``),
        one value per node that its slots share. The partition id is the diff's to pick against
        Fabric Manager, so it is not shown here."""
        mine = node_gpus(node, self.instance)
        return {
            "gpus": [{"module_id": g.module_id.value, "pci_bus_id": g.pci_bus_id} for g in mine],
            "partition_gpus": partition_gpus(node, tenancy) if mine else 0,
            "nvlink_domain": node_domain(node.name, mine).to_dict() if mine else None,
        }

    def cli_group(self) -> CliGroup:
        """``gpufabric nvlink domains`` (:mod:`views`)."""
        from gpufabric.fabrics.nvlink.views import cli_group

        return cli_group()


def partition_gpus(node: Node, tenancy: Tenancy | None) -> int | None:
    """GPUs of the partition the lease of ``node`` holds in ``tenancy`` (0: in quarantine)."""
    if tenancy is None:
        return None
    lease = tenancy.owners.get(node.name)
    if lease is None:
        return 0
    want = lease.term(GPUS.name)
    return len(node_gpus(node)) if want is None else want
