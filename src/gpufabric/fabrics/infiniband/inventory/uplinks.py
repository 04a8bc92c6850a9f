"""Each HCA port's path up the subnet, from the subnet's own topology (``ibnetdiscover``): its
leaf (the switch it is cabled to) and the tiers of switches above (spines, cores), for the node
API (issue 31 item 11, NVIDIA NCP NET01-01). A switch's rank is its distance in switch hops from
the nearest CA (a leaf is rank 1); its uplinks are its links to switches of a higher rank, which
in a fat tree (leaf/spine/core) are exactly the links up. A switch is named by its node
description (``leaf-01``), else by its GUID. Pure: no I/O."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from gpufabric.domain.topology import SwitchPath, tiers_above
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.entries import IbPort
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import IbEndpoint, IbTopology, NodeKind


def _guid(e: IbEndpoint) -> Guid | None:
    return e.node_guid if e.node_guid is not None else e.port_guid


def leaf_paths(topo: IbTopology) -> dict[Guid, SwitchPath]:
    """Switch GUID -> the path up from that switch (itself first), for every switch a CA is cabled to."""
    names: dict[Guid, str] = {}
    neighbours: dict[Guid, set[Guid]] = {}
    leaves: set[Guid] = set()
    for link in topo.links:
        a, b = link.a, link.b
        for one, other in ((a, b), (b, a)):
            g = _guid(one)
            if one.kind is not NodeKind.SWITCH or g is None:
                continue
            names.setdefault(g, one.description.strip() or str(g))
            og = _guid(other)
            if other.kind is NodeKind.SWITCH and og is not None and og != g:
                neighbours.setdefault(g, set()).add(og)
            elif other.kind is NodeKind.CA:
                leaves.add(g)
    rank = {g: 1 for g in leaves}
    frontier = sorted(leaves, key=lambda g: g.value)
    while frontier:  # breadth first from the leaves
        nxt = []
        for g in frontier:
            for n in neighbours.get(g, ()):
                if n not in rank:
                    rank[n] = rank[g] + 1
                    nxt.append(n)
        frontier = nxt
    up = {str(g): [str(n) for n in ns if rank.get(n, 0) > rank.get(g, 0)] for g, ns in neighbours.items()}
    by_key = {str(g): names[g] for g in names}
    return {
        leaf: tuple(tuple(sorted(by_key[k] for k in tier)) for tier in tiers_above(str(leaf), up))
        for leaf in leaves
    }


def with_paths(ports: Iterable[IbPort], paths: Mapping[Guid, SwitchPath]) -> tuple[IbPort, ...]:
    """``ports``, each with the path up from the switch it is cabled to (as :func:`leaf_paths` found it)."""
    return tuple(
        dataclasses.replace(p, path=paths[p.switch_guid]) if p.switch_guid is not None and p.switch_guid in paths else p
        for p in ports
    )
