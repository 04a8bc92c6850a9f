"""Slots of shared hosts in the store (issue 33, :mod:`gpufabric.domain.slots`): which slots of a
host are live, whether a host is shared now, and the refusals every move request gets so that two
live slots of one host never hold one GPU and a host's offering never changes under its slots.

A slot is *live* while it is leased or moving, or has an open move (scheduled or offered too): its
GPUs are taken. A slot back in quarantine with nothing open is idle: its row stays (its ended
leases keep their history; a slot of the same GPUs later reuses it), and it holds nothing.
Checked in the request's own transaction, the host's row locked with the slots'."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpufabric.domain import move_json
from gpufabric.domain.errors import ConflictError
from gpufabric.domain.models import QUARANTINE, NodeState
from gpufabric.domain.slots import is_shared as offering_shared
from gpufabric.store.convert import offering_to_domain
from gpufabric.store.tables import LeaseRow, MoveRow, NodeRow, OfferingRow, lease_active_at
from gpufabric.store.tx import Tx

_LIVE_STATES = (NodeState.LEASED.value, NodeState.MOVING.value)


def select_node(name: str) -> Any:
    """The SELECT of node ``name``'s row."""
    return select(NodeRow).where(NodeRow.name == name)


def slot_rows(s: Session, host: str, lock: bool = False) -> list[NodeRow]:
    """Every slot of ``host`` (live or idle), by name; ``lock``: held until the transaction ends."""
    q = select(NodeRow).where(NodeRow.host == host).order_by(NodeRow.name)
    return list(s.scalars(q.with_for_update() if lock else q))


def live(s: Session, rows: Collection[NodeRow], but: str = "") -> list[NodeRow]:
    """The live slots among ``rows`` (``but``: leave that one out)."""
    names = [r.name for r in rows if r.name != but]
    if not names:
        return []
    q = select(MoveRow.node).where(MoveRow.node.in_(names), MoveRow.status.in_(move_json.OPEN))
    moving = set(s.scalars(q))
    return [r for r in rows if r.name != but and (r.state in _LIVE_STATES or r.name in moving)]


def taken_modules(s: Session, host: str, but: str = "") -> frozenset[int]:
    """The GPU module ids of ``host`` its live slots hold (``but``: not counting that slot)."""
    return frozenset(m for r in live(s, slot_rows(s, host, lock=True), but) for m in (r.slot_modules or ()))


def shared_now(s: Session, host: str, now: datetime) -> bool:
    """``host`` is leased now in an offering whose ``shared`` setting is ``slots``."""
    q = (
        select(OfferingRow)
        .join(LeaseRow, LeaseRow.offering == OfferingRow.name)
        .join(NodeRow, LeaseRow.node_id == NodeRow.id)
        .where(NodeRow.name == host, lease_active_at(now))
    )
    return any(offering_shared(offering_to_domain(o)) for o in s.scalars(q))  # the one rule: domain.slots


def check_request(s: Session, row: NodeRow, to_tenant: str, now: datetime) -> None:
    """A move of ``row`` refused for its slots' sake: a host with live slots keeps its lease and
    offering (ConflictError naming them); a slot joins a tenant only while its host is shared
    and none of its GPUs is held by another live slot of the host."""
    if row.host:
        if to_tenant == QUARANTINE:
            return
        if not shared_now(s, row.host, now):
            raise ConflictError(
                f"slot {row.name}: its host {row.host} is not a vm-host now (lease it in a shared offering first)",
                node=row.name, host=row.host,
            )  # fmt: skip
        clash = sorted(taken_modules(s, row.host, but=row.name) & set(row.slot_modules or ()))
        if clash:
            raise ConflictError(
                f"slot {row.name}: GPU modules {','.join(map(str, clash))} of {row.host} are in another live slot",
                node=row.name, host=row.host,
            )  # fmt: skip
        return
    busy = live(s, slot_rows(s, row.name, lock=True))
    if busy:
        names = ", ".join(r.name for r in busy[:8]) + (f" and {len(busy) - 8} more" if len(busy) > 8 else "")
        raise ConflictError(
            f"node {row.name} has live slots ({names}): end their leases before its own lease or offering changes",
            node=row.name, slots=len(busy),
        )  # fmt: skip


def host_of(tx: Tx, name: str) -> str | None:
    """Node ``name``'s host ('' for a node that is not a slot; None: no such node)."""
    row = tx.session.scalars(select_node(name)).first()
    return None if row is None else (row.host or "")


def slot_modules_of(tx: Tx, name: str) -> tuple[str, tuple[int, ...]] | None:
    """Slot ``name``'s host and GPU modules (None: no such node)."""
    row = tx.session.scalars(select_node(name)).first()
    return None if row is None else (row.host or "", tuple(sorted(row.slot_modules or ())))


def inherit_owner(tx: Tx, slot: str, host: str) -> None:
    """Slot ``slot`` has its host's owner (ESI's owner: who may lease and offer it), as it is now."""
    s = tx.session
    owner = s.scalar(select(NodeRow.owner).where(NodeRow.name == host))
    row = s.scalars(select_node(slot)).first()
    if row is not None:
        row.owner = owner


def is_shared(tx: Tx, host: str, now: datetime) -> bool:
    """:func:`shared_now` in ``tx``."""
    return shared_now(tx.session, host, now)


def taken(tx: Tx, host: str) -> frozenset[int]:
    """:func:`taken_modules` in ``tx`` (the host's slot rows locked)."""
    return taken_modules(tx.session, host)

