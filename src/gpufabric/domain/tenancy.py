"""The pure input every fabric kind derives its desired slice from: who owns each node now
(:class:`Tenancy`), with the networks, offerings and deployment-wide settings it needs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpufabric.domain.models import QUARANTINE, Lease, Network, Node, Offering


@dataclass(frozen=True)
class Tenancy:
    """The pure input every fabric derives its desired slice from: who owns each node now.

    ``owners`` maps every node to the lease that owns it now, or ``None`` (quarantine).
    ``settings`` are deployment-wide facts fabrics may need (e.g. ``quarantine_vlan``,
    ``sm_port_guids``), each with one source (``Fabrics``/``SegmentConfig``)."""

    nodes: tuple[Node, ...]
    owners: Mapping[str, Lease | None]
    networks: Mapping[tuple[str, str], Network]  # by (tenant, name): names are unique per tenant
    offerings: Mapping[str, Offering] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)

    def owner(self, node: str) -> str:
        lease = self.owners.get(node)
        return lease.tenant if lease is not None else QUARANTINE

    def lease_networks(self, node: str) -> tuple[Network, ...]:
        """The networks of the lease that owns ``node`` now (none in quarantine)."""
        lease = self.owners.get(node)
        if lease is None:
            return ()
        return tuple(n for name in lease.networks if (n := self.networks.get((lease.tenant, name))) is not None)

    def offering(self, node: str) -> Offering | None:
        lease = self.owners.get(node)
        return self.offerings.get(lease.offering) if lease is not None else None
