"""The one workflow for every change of tenancy: grant (lease create), move, end (lease end or
delete), expiry and release. Each takes a principal and becomes a durable move that always
passes through quarantine (:mod:`gpufabric.engine.moves`); nothing here writes a lease or
touches a fabric directly.

* ``grant``: a lease is granted only on an available node (in quarantine) or on a node already
  leased to the same tenant's move; a node leased to another tenant is refused, naming the lease
  (``node move`` is the explicit hand-over). A future start schedules the move (``not_before``).
  An owner's lease into *another* tenant is only an offer: nothing runs until that tenant (its
  owner or lessee token) or an admin accepts it (``accept``/``decline``).
* networks: ``None`` means every network of the target tenant, and only for a principal that
  acts in that tenant (admin, service, or the tenant's own token); anyone else gets none, and
  naming another tenant's networks is "network not found". An empty list always means none:
  the lease's ports stay shut until networks attach.
* ``end``: the lease's node goes to quarantine; the lease keeps its row, ended (ids are never
  reused, history stays whole).
* ``release_expired``: a lease whose end has passed is released by the worker's next tick.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from gpufabric.domain.auth import LOCAL_ADMIN, Principal, Role
from gpufabric.domain.errors import ConflictError, ForbiddenError, NotFoundError, ValidationError
from gpufabric.domain.fabric import FabricKind
from gpufabric.domain.models import QUARANTINE, Lease
from gpufabric.domain.moves import Move, MoveRequest
from gpufabric.domain.terms import LeaseTerms
from gpufabric.domain.values import check_id, check_name
from gpufabric.store.core import Store
from gpufabric.store.moves import MoveLedger
from gpufabric.store.offers import decide_offer
from gpufabric.store.registry import registered_kinds
from gpufabric.store.tenants import node_owner
from gpufabric.store.tx import Tx
from gpufabric.workflow.slots import carve

LOCAL_OPERATOR = LOCAL_ADMIN
"""The CLI acting directly on the store: the local operator's admin path."""

WORKER = Principal("worker", Role.ADMIN)
"""The serve process's worker (lease expiry)."""


def offers_into(p: Principal, tenant: str) -> bool:
    """A grant by ``p`` into ``tenant`` is only an offer (the receiving tenant must accept it)."""
    return p.role is Role.OWNER and p.tenant != tenant


def who(p: Principal) -> str:
    """How a move records the principal that asked for it."""
    return f"{p.role.value}:{p.name}" + (f"@{p.tenant}" if p.tenant else "")


class TenantWorkflow:
    """The workflow over a store; ``ledger`` records moves for a worker to run. ``kinds``: the
    fabric instances asked to refuse a request (:meth:`FabricKind.check_request`; None: the
    registered kinds' default instances)."""

    def __init__(self, store: Store, kinds: Callable[[], Sequence[FabricKind[Any, Any]] | None] = lambda: None) -> None:
        self.store = store
        self.ledger = MoveLedger(store)
        self.kinds = kinds

    def _check(self, nodes: Sequence[str], req: MoveRequest, tx: Tx | None) -> None:
        """Each fabric instance's refusal of ``req`` for each of ``nodes``, before anything is
        written; only kinds that declare a term the request sets are asked (and the nodes read)."""
        def asks(k: FabricKind[Any, Any]) -> bool:
            return any(req.term(t.name) is not None for t in k.lease_terms)

        if not req.terms or not any(asks(k) for k in registered_kinds()):  # (the configured instances read only then)
            return
        asked = [k for k in self.kinds() or registered_kinds() if asks(k)]
        with self.store.tx(tx) as t:
            for name in dict.fromkeys(nodes):
                node = self.store.node(name, t)
                for k in asked:
                    k.check_request(node, req)

    def grant(
        self,
        principal: Principal,
        tenant: str,
        node: str,
        networks: Sequence[str] | None,
        offering: str = "baremetal",
        *,
        terms: LeaseTerms = (),
        start: datetime | None = None,
        end: datetime | None = None,
        tx: Tx | None = None,
        slot: bool = False,
    ) -> Move:
        """Lease ``node`` to ``tenant``: a move from quarantine (now, or at ``start``), refused
        when the node is leased now; an offer when :func:`offers_into`. ``tx``: the caller's
        transaction (its quota counts and its event commit with the request). On a shared host
        (``vm-host``) the lease is of a slot of the GPU count the terms name, carved in the same
        transaction (:mod:`gpufabric.workflow.slots`); ``slot``: refuse a host that is not shared."""
        check_name("lease.tenant", tenant)
        now = datetime.now(UTC)
        if start is not None and start.tzinfo is None:
            raise ValidationError("lease.start", start.isoformat(), "a timezone-aware time (e.g. ...Z)")
        nets = self._networks(principal, tenant, networks)
        with self.store.tx(tx) as t:
            node, terms = carve(self.store, self.kinds() or registered_kinds(), node, terms, t, slot)
            req = MoveRequest(
                tenant, offering, nets, terms=terms, lease_end=end, grant=True, requested_by=who(principal),
                not_before=start if start is not None and start > now else None, offered=offers_into(principal, tenant),
            )  # fmt: skip
            self._check([node], req, t)
            return self.ledger.request(node, req, tx=t)

    @staticmethod
    def _networks(principal: Principal, tenant: str, networks: Sequence[str] | None) -> tuple[str, ...] | None:
        """The networks a move into ``tenant`` joins (see the module docstring for ``None``); None:
        every network of the tenant, read once, by the request itself (in its transaction)."""
        if networks is not None:
            if networks and not principal.sees_tenant(tenant):  # another tenant's networks do not exist for it
                raise NotFoundError("network", f"{tenant}/{networks[0]}")
            return tuple(networks)
        if tenant == QUARANTINE or not principal.sees_tenant(tenant):
            return ()
        return None

    def decide(self, principal: Principal, move_id: int, accept: bool, tx: Tx | None = None) -> Move:
        """Accept (or decline) an offered lease: only the receiving tenant's own token or an
        admin may; anyone else is told the offer does not exist. The move's row is locked, the
        permission read and the status changed in one transaction (``tx``: the caller's)."""
        with self.store.tx(tx) as tx:
            move = self.ledger.get(check_id("move.id", move_id), tx=tx)
            if not principal.sees_tenant(move.to_tenant):
                withdraw = principal.role is Role.OWNER and not accept
                if not (withdraw and node_owner(self.store, move.node, tx=tx) == principal.tenant):
                    raise NotFoundError("offer", str(move_id))  # (the node's owner may withdraw its offer)
            if accept and principal.role is Role.SERVICE:
                raise ForbiddenError(
                    "only the receiving tenant or an admin may accept an offer", field="role",
                    value=principal.role.value, allowed="admin, or the tenant's owner/lessee",
                )  # fmt: skip
            return decide_offer(tx, move.id or move_id, accept)

    def move(
        self,
        principal: Principal,
        node: str,
        to_tenant: str,
        networks: Sequence[str] | None = None,
        offering: str = "baremetal",
        terms: LeaseTerms = (),
        tx: Tx | None = None,
    ) -> Move:
        """Hand ``node`` to ``to_tenant`` (QUARANTINE releases it) through quarantine."""
        return self.move_many(principal, [node], to_tenant, networks, offering, terms, tx=tx)[0]

    def move_many(
        self,
        principal: Principal,
        nodes: Sequence[str],
        to_tenant: str,
        networks: Sequence[str] | None = None,
        offering: str = "baremetal",
        terms: LeaseTerms = (),
        tx: Tx | None = None,
    ) -> list[Move]:
        """:meth:`move` for several nodes, requested in one transaction (all or none; ``tx``: the
        caller's): the worker claims them together and runs them as one batch."""
        nets = self._networks(principal, to_tenant, networks)
        req = MoveRequest(to_tenant, offering, nets, terms=terms, requested_by=who(principal))
        self._check(nodes, req, tx)
        return self.ledger.request_many(nodes, req, tx=tx)

    def end(self, principal: Principal, lease_id: int) -> tuple[Lease, Move | None]:
        """End lease ``lease_id`` now: its node goes to quarantine. A lease that has not started
        or has already ended needs no move (the former is simply cancelled)."""
        lease = self.store.lease(check_id("lease.id", lease_id))
        now = datetime.now(UTC)
        if lease.active_at(now):
            return lease, self.ledger.request(lease.node, MoveRequest(QUARANTINE, requested_by=who(principal)))
        if lease.start > now:  # never took effect: cancelled (its id is never given again)
            return self.store.delete_lease(lease_id), None
        return lease, None

    def release_expired(self, principal: Principal) -> list[Move]:
        """Release every node whose lease has ended (the worker calls this every tick)."""
        out = []
        for node in self.ledger.expired_nodes():
            try:
                release = MoveRequest(QUARANTINE, release_ended=True, requested_by=who(principal))
                out.append(self.ledger.request(node, release))
            except ConflictError:
                continue  # a move took it meanwhile
        return out
