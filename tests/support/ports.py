"""Tests' shorthand for nodes with Ethernet and InfiniBand ports: the kinds keep a node's NICs and
HCA ports as their entries (``fabrics/ethernet/entries.py``, ``fabrics/infiniband/entries.py``),
so a node is built with its ports through them, keys and all, as the inventory reader builds it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from gpufabric.domain.models import FabricPorts, Node, NodeState
from gpufabric.fabrics.ethernet.entries import EthernetPort, with_ethernet
from gpufabric.fabrics.infiniband.entries import IbPort, with_ib


def port_node(
    name: str, offering: str = "", state: NodeState = NodeState.AVAILABLE, ethernet: Iterable[EthernetPort] = (),
    ib: Iterable[IbPort] = (), fabric_ports: Iterable[FabricPorts] = (),
) -> Node:  # fmt: skip
    """``Node(name, ...)`` with ``ethernet`` NICs and ``ib`` HCA ports on the kinds' default instances."""
    return replace_ports(Node(name, offering, state, tuple(sorted(fabric_ports))), ethernet=tuple(ethernet), ib=tuple(ib))


def replace_ports(node: Node, *, ethernet: Iterable[EthernetPort] | None = None, ib: Iterable[IbPort] | None = None,
                  **changes: Any) -> Node:  # fmt: skip
    """``dataclasses.replace(node, **changes)`` with its NICs / HCA ports replaced when given (empty: none)."""
    n = dataclasses.replace(node, **changes) if changes else node
    if ethernet is not None:
        n = with_ethernet(n, *ethernet)
    if ib is not None:
        n = with_ib(n, *ib)
    return n
