"""Desired fabric state, derived (purely) from the inventory, the active leases and the
moves in flight, by every registered fabric kind.

Every port of a node belongs to exactly one owner: the node's tenant (through its lease) or
quarantine. A move in flight overrides the lease: while it is in its quarantine phase the
node is desired in quarantine on every fabric.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpufabric.domain.fabric import FabricKind, Tenancy
from gpufabric.domain.models import QUARANTINE, Lease, Network, Node, Offering


@dataclass(frozen=True)
class DesiredState:
    """What every fabric should look like (one slice per fabric), plus who owns each node."""

    slices: Mapping[str, Any]
    owners: tuple[tuple[str, str], ...]  # (node, tenant or QUARANTINE), sorted
    tenancy: Tenancy

    def owner(self, node: str) -> str:
        return dict(self.owners).get(node, QUARANTINE)

    def get(self, fabric: str, default: Any = None) -> Any:
        return self.slices.get(fabric, default)


def owners_of(
    nodes: Iterable[Node], leases: Iterable[Lease], overrides: Mapping[str, str] | None = None
) -> dict[str, Lease | None]:
    """node -> the lease that owns it now (None: quarantine). ``overrides`` maps a node to
    QUARANTINE to force it there whatever its lease (a move in its quarantine phase)."""
    by_node: dict[str, Lease | None] = {n.name: None for n in nodes}
    for lease in leases:
        if lease.node in by_node:
            by_node[lease.node] = lease
    for node, who in (overrides or {}).items():
        if who == QUARANTINE and node in by_node:
            by_node[node] = None
    return by_node


def tenancy_of(
    nodes: Iterable[Node],
    leases: Iterable[Lease],
    networks: Iterable[Network],
    offerings: Iterable[Offering] = (),
    settings: Mapping[str, Any] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> Tenancy:
    node_list = tuple(sorted(nodes, key=lambda n: n.name))
    return Tenancy(
        nodes=node_list,
        owners=owners_of(node_list, leases, overrides),
        networks={(n.tenant, n.name): n for n in networks},
        offerings={o.name: o for o in offerings},
        settings=dict(settings or {}),
    )


def derive_desired(kinds: Sequence[FabricKind[Any, Any]], tenancy: Tenancy) -> DesiredState:
    """Each fabric instance's desired slice of ``tenancy`` (keyed by instance name)."""
    owners = tuple(sorted((n, tenancy.owner(n)) for n in tenancy.owners))
    return DesiredState({k.instance: k.desired(tenancy) for k in kinds}, owners, tenancy)
