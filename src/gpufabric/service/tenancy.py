"""The one workflow for every change of tenancy: grant (lease create), move, end (lease end or
delete), expiry and release. Each takes a principal and becomes a durable move that always
passes through quarantine (:mod:`gpufabric.service.moves`); nothing here writes a lease or
touches a fabric directly.

* ``grant``: a lease is granted only on an available node (in quarantine) or on a node already
  leased to the same tenant's move; a node leased to another tenant is refused, naming the lease
  (``node move`` is the explicit hand-over). A future start schedules the move (``not_before``).
* ``end``: the lease's node goes to quarantine; the lease keeps its row, ended (ids are never
  reused, history stays whole).
* ``release_expired``: a lease whose end has passed is released by the worker's next tick.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from gpufabric.domain.auth import LOCAL_ADMIN, Principal, Role
from gpufabric.domain.errors import ConflictError, ValidationError
from gpufabric.domain.models import QUARANTINE, Lease
from gpufabric.domain.moves import Move
from gpufabric.domain.values import check_id, check_name
from gpufabric.service.store import Store
from gpufabric.service.store_moves import MoveLedger

LOCAL_OPERATOR = LOCAL_ADMIN
"""The CLI acting directly on the store: the local operator's admin path."""

WORKER = Principal("worker", Role.ADMIN)
"""The serve process's worker (lease expiry)."""


def who(p: Principal) -> str:
    """How a move records the principal that asked for it."""
    return f"{p.role.value}:{p.name}" + (f"@{p.tenant}" if p.tenant else "")


class Tenancy:
    """The workflow over a store; ``ledger`` records moves for a worker to run."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.ledger = MoveLedger(store)

    def grant(
        self,
        principal: Principal,
        tenant: str,
        node: str,
        networks: Sequence[str],
        offering: str = "baremetal",
        *,
        gpus: int | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        also: Callable[[Session], None] | None = None,
    ) -> Move:
        """Lease ``node`` to ``tenant``: a move from quarantine (now, or at ``start``), refused
        when the node is leased now. ``also`` writes more rows in the same transaction."""
        check_name("lease.tenant", tenant)
        now = datetime.now(UTC)
        if start is not None and start.tzinfo is None:
            raise ValidationError("lease.start", start.isoformat(), "a timezone-aware time (e.g. ...Z)")
        nets = tuple(networks) or tuple(x.name for x in self.store.networks(tenant))
        return self.ledger.request(
            node, tenant, offering, nets, gpus=gpus, lease_end=end, grant=True, also=also,
            not_before=start if start is not None and start > now else None, requested_by=who(principal),
        )  # fmt: skip

    def move(
        self,
        principal: Principal,
        node: str,
        to_tenant: str,
        networks: Sequence[str] = (),
        offering: str = "baremetal",
        gpus: int | None = None,
    ) -> Move:
        """Hand ``node`` to ``to_tenant`` (QUARANTINE releases it) through quarantine."""
        return self.move_many(principal, [node], to_tenant, networks, offering, gpus)[0]

    def move_many(
        self,
        principal: Principal,
        nodes: Sequence[str],
        to_tenant: str,
        networks: Sequence[str] = (),
        offering: str = "baremetal",
        gpus: int | None = None,
        also: Callable[[Session], None] | None = None,
    ) -> list[Move]:
        """:meth:`move` for several nodes, requested in one transaction (all or none): the worker
        claims them together and runs them as one batch."""
        nets = tuple(networks)
        if not nets and to_tenant != QUARANTINE:
            nets = tuple(x.name for x in self.store.networks(to_tenant))
        return self.ledger.request_many(
            nodes, to_tenant, offering, nets, gpus=gpus, requested_by=who(principal), also=also
        )

    def end(self, principal: Principal, lease_id: int) -> tuple[Lease, Move | None]:
        """End lease ``lease_id`` now: its node goes to quarantine. A lease that has not started
        or has already ended needs no move (the former is simply cancelled)."""
        lease = self.store.lease(check_id("lease.id", lease_id))
        now = datetime.now(UTC)
        if lease.active_at(now):
            return lease, self.ledger.request(lease.node, QUARANTINE, requested_by=who(principal))
        if lease.start > now:  # never took effect: cancelled (its id is never given again)
            return self.store.delete_lease(lease_id), None
        return lease, None

    def release_expired(self, principal: Principal) -> list[Move]:
        """Release every node whose lease has ended (the worker calls this every tick)."""
        out = []
        for node in self.ledger.expired_nodes():
            try:
                out.append(self.ledger.request(node, QUARANTINE, release_ended=True, requested_by=who(principal)))
            except ConflictError:
                continue  # a move took it meanwhile
        return out
