"""Which node an observed port is on, by what gpufabric stores (pure; issue 31, item 5).

A finding about a port (a rogue SM answering at a LID, say) names its node by the port GUID the
inventory holds, else by the stored cabling (the switch GUID and port discovery found the port
on), never by the port's node description: root on a host sets that at will (rdma-ndd), so a
rogue SM on gpu-a01 whose HCA says ``gpu-b01 mlx5_0`` is still reported on gpu-a01. The
description is only quoted, as a claim, when it names another host.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.entries import IbPort


@dataclass(frozen=True)
class Places:
    """The stored port GUID -> node and (switch GUID, switch port) -> node maps."""

    by_guid: Mapping[Guid, str] = field(default_factory=dict)
    by_cable: Mapping[tuple[Guid, int], str] = field(default_factory=dict)

    @classmethod
    def of(cls, ports: Iterable[IbPort]) -> Places:
        """From the stored HCA ports (one subnet's)."""
        guid: dict[Guid, str] = {}
        cable: dict[tuple[Guid, int], str] = {}
        for p in ports:
            guid[p.port_guid] = p.node
            if p.switch_guid is not None and p.switch_port is not None:
                cable[(p.switch_guid, p.switch_port)] = p.node
        return cls(guid, cable)

    def node(self, port_guid: Guid | None, switch_guid: Guid | None = None, switch_port: int | None = None) -> str:
        """The stored node of ``port_guid``, else of the cabling; "" when neither is stored."""
        if port_guid is not None and port_guid in self.by_guid:
            return self.by_guid[port_guid]
        if switch_guid is not None and switch_port is not None:
            return self.by_cable.get((switch_guid, switch_port), "")
        return ""

    def where(self, port_guid: Guid | None, switch_guid: Guid | None, switch_port: int | None, description: str) -> str:
        """`` on node N`` (by GUID), `` cabled where node N's port is`` (by cabling) or "", with the
        description quoted as a claim when it names another host (or no node is stored)."""
        by_guid = port_guid is not None and port_guid in self.by_guid
        node = self.node(port_guid, switch_guid, switch_port)
        text = f" on node {node}" if by_guid else f" cabled where node {node}'s port is" if node else ""
        desc = description.strip()
        if desc and desc.split(" ", 1)[0].lower() != node:
            text += f" (its node description, set by the host, says {desc[:64]!r})"
        return text
