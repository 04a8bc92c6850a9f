"""A move: a node handed from one owner (tenant or quarantine) to another, as a durable
intent with phases.

Phases run in order and each is idempotent, so a crashed move is resumed by running its
recorded phase again:

``quarantine``  every port of the node leaves its old tenant (applied, then verified by reading the fabrics)
``swap``        the old lease ends and the new one starts, in one store transaction
``join``        every port joins the new tenant (applied, verified)
``done``
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime

from gpufabric.domain.models import QUARANTINE
from gpufabric.domain.terms import LeaseTerms, term, terms_of
from gpufabric.domain.values import check_name


class MovePhase(enum.StrEnum):
    QUARANTINE = "quarantine"
    SWAP = "swap"
    JOIN = "join"
    DONE = "done"


PHASE_ORDER: tuple[MovePhase, ...] = (MovePhase.QUARANTINE, MovePhase.SWAP, MovePhase.JOIN, MovePhase.DONE)


class MoveStatus(enum.StrEnum):
    PENDING = "pending"  # waiting for a worker
    RUNNING = "running"  # claimed by a worker
    FAILED = "failed"  # stopped at ``phase`` with ``error``; a retry resumes there
    DONE = "done"
    OFFERED = "offered"  # a lease offered into another tenant: waits for that tenant (or an admin) to accept
    CANCELLED = "cancelled"  # never run (an offer declined or withdrawn; a move cancelled by an operator before it started, or after it failed)


@dataclass(frozen=True)
class MoveRequest:
    """What a request to move node(s) asks for, one value through every layer (workflow -> ledger ->
    the request's checks): the target and the new lease's terms. The store validates it against what
    it holds (tenant, networks, offering, the terms' ranges, open moves) when the move is recorded.

    ``networks=None``: every network of ``to_tenant``, read with the request's checks.
    ``release_ended``: a release of a node whose lease has already ended (expiry).
    ``grant``: a lease grant, refused when the node is leased now (naming its lease).
    ``offered``: recorded as an offer, run only once the receiving tenant accepts it."""

    to_tenant: str  # a tenant, or QUARANTINE to release the node
    offering: str = "baremetal"
    networks: tuple[str, ...] | None = ()
    terms: LeaseTerms = ()  # the new lease's terms (domain/terms.py)
    lease_end: datetime | None = None  # the new lease's end (None: open-ended)
    release_ended: bool = False
    not_before: datetime | None = None  # not run before this time (a scheduled lease's start)
    requested_by: str = ""  # the principal that asks
    grant: bool = False
    offered: bool = False

    def __post_init__(self) -> None:
        if self.networks is not None and not isinstance(self.networks, tuple):
            object.__setattr__(self, "networks", tuple(self.networks))
        object.__setattr__(self, "terms", terms_of(self.terms))

    def term(self, name: str) -> int | None:
        """The value of the new lease's term ``name`` (None: unset)."""
        return term(self.terms, name)


@dataclass(frozen=True)
class Move:
    node: str
    to_tenant: str  # a tenant, or QUARANTINE to release the node
    from_tenant: str = QUARANTINE
    offering: str = "baremetal"
    networks: tuple[str, ...] = ()
    phase: MovePhase = MovePhase.QUARANTINE
    status: MoveStatus = MoveStatus.PENDING
    attempts: int = 0
    error: str = ""
    claimed_by: str | None = None
    id: int | None = None
    terms: LeaseTerms = ()  # the new lease's terms (domain/terms.py)
    lease_end: datetime | None = None  # the new lease's end (None: open-ended)
    not_before: datetime | None = None  # not run before this time (a scheduled lease's start)
    requested_by: str = ""  # the principal that asked for it

    def __post_init__(self) -> None:
        check_name("move.node", self.node)
        if self.to_tenant != QUARANTINE:
            check_name("move.to_tenant", self.to_tenant)
        object.__setattr__(self, "terms", terms_of(self.terms))

    def term(self, name: str) -> int | None:
        """The value of the new lease's term ``name`` (None: unset)."""
        return term(self.terms, name)

    @property
    def finished(self) -> bool:
        return self.status is MoveStatus.DONE

    def holds_node_in_quarantine(self, now: datetime | None = None, prepared: bool = False) -> bool:
        """From the moment its fabrics prepared the node (``prepared``: ``before_move`` passed — the
        gates, the OpenShift cordon and drain) until the lease swap has committed, the node is
        desired in quarantine whatever its old lease: before that it stays with its old tenant, so
        no converge (another batch, a reconcile repair) quarantines it ahead of its drain. A failed
        move holds it there too (its ports were sent to quarantine) until retried. A scheduled move
        holds nothing before its time."""
        if self.status in (MoveStatus.DONE, MoveStatus.OFFERED, MoveStatus.CANCELLED):
            return False
        scheduled = self.status is MoveStatus.PENDING and self.not_before is not None
        if scheduled and self.not_before is not None and self.not_before > (now or datetime.now(UTC)):
            return False
        if self.status is MoveStatus.FAILED or self.phase is MovePhase.SWAP:
            return True
        return self.phase is MovePhase.QUARANTINE and prepared
