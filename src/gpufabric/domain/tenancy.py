"""The pure input every fabric kind derives its desired slice from: who owns each node now
(:class:`Tenancy`), with the networks, offerings and deployment-wide settings it needs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from gpufabric.domain.models import QUARANTINE, Lease, Network, Node, Offering
from gpufabric.domain.slots import gpu_unit, is_shared, slots_by_host


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

    # ------------------------------------------------------------ shared hosts (issue 33)
    @cached_property
    def _slots(self) -> Mapping[str, tuple[Node, ...]]:
        return slots_by_host(self.nodes)

    def shared(self, host: str) -> bool:
        """``host`` is leased in a shared offering (``vm-host``): its GPUs go to its slots."""
        return is_shared(self.offering(host))

    def slots_of(self, host: str) -> tuple[Node, ...]:
        """The slots carved from ``host`` (whatever their owners), sorted by name."""
        return self._slots.get(host, ())

    def gpu_unit(self, host: str, module: int) -> str | None:
        """The node whose lease governs GPU ``module`` of ``host`` (:func:`gpufabric.domain.slots.gpu_unit`):
        a slot of a shared host, the host itself otherwise; None: in quarantine."""
        return gpu_unit(host, module, self.shared(host), self.slots_of(host))

    def gpu_lease(self, host: str, module: int) -> Lease | None:
        """The lease that owns GPU ``module`` of ``host`` and what follows it now (None: quarantine)."""
        unit = self.gpu_unit(host, module)
        return self.owners.get(unit) if unit is not None else None

    def slot_leases(self, host: str) -> tuple[Lease, ...]:
        """The leases that own a slot of ``host`` now (a slot in quarantine has none), by slot name."""
        return tuple(lease for s in self.slots_of(host) if (lease := self.owners.get(s.name)) is not None)
