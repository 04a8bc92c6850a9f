"""Carving a slot of a shared host for a lease (issue 33, :mod:`gpufabric.domain.slots`): a lease
asked of a ``vm-host`` with a GPU count becomes the lease of a slot node holding that many of the
host's GPUs, which the fabric kinds choose (``FabricKind.slot_modules``: the NVLink kind's
partition allocator, disjoint from the GPUs of the host's live slots) and accept
(``FabricKind.check_slot``: e.g. a rail HCA for each GPU). The slot's node is written in the
caller's transaction, with the grant that leases it: a refused request writes nothing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.fabric import FabricKind
from gpufabric.domain.lease_terms import term
from gpufabric.domain.models import Inventory, Node
from gpufabric.domain.slots import SIZE_TERM, VM_HOST, check_slot_size, slot_name
from gpufabric.domain.terms import LeaseTerms
from gpufabric.store import slots as stored
from gpufabric.store.core import Store
from gpufabric.store.tx import Tx


def carve(
    store: Store, kinds: Sequence[FabricKind[Any, Any]], host: str, terms: LeaseTerms, tx: Tx, want_slot: bool = False
) -> tuple[str, LeaseTerms]:
    """The node a lease asked of ``host`` with ``terms`` goes to, and the lease's terms: ``host``
    and ``terms`` themselves unless ``host`` is a shared host now; there, a slot of the GPU count
    ``terms`` names (created, or an idle one of the same GPUs reused), its terms without the count.
    ``want_slot``: the caller asked for a slot; a host that is not shared is refused."""
    of = stored.host_of(tx, host)
    if of is None:
        return host, terms  # the request says "node not found"
    if of:
        if want_slot:
            raise ValidationError("node", host, f"a {VM_HOST} host (this is a slot of {of}: lease it by name without --slot)")
        return host, terms
    if not stored.is_shared(tx, host, datetime.now(UTC)):
        if want_slot:
            raise ValidationError("node", host, f"a {VM_HOST} host (lease the host in offering {VM_HOST} first)", f"{host} is not shared now")
        return host, terms
    count = term(terms, SIZE_TERM)
    if count is None:
        raise ValidationError(SIZE_TERM, None, "1, 2, 4 or 8 GPUs", f"{host} is a {VM_HOST}: a lease of it is a slot of N GPUs")
    k = check_slot_size(count)
    node = store.node(host, tx)
    taken = stored.taken(tx, host)
    modules = next((m for kind in kinds if (m := kind.slot_modules(node, k, taken)) is not None), None)
    if modules is None:
        raise ValidationError(SIZE_TERM, k, "a fabric that carves slots (GPUs of the host in the inventory)", f"node {host}")
    for kind in kinds:
        kind.check_slot(node, frozenset(modules))
    name = slot_name(host, modules)
    known = stored.slot_modules_of(tx, name)
    if known is None:
        store.upsert_inventory(Inventory((Node(name, host=host, slot_modules=tuple(sorted(modules))),)), within=tx)
    elif known != (host, tuple(sorted(modules))):
        raise ValidationError("node", name, "a name no other node holds (a slot's name is its host and GPUs)")
    stored.inherit_owner(tx, name, host)  # owners apply per slot: the host's owner owns its slots
    return name, tuple((n, v) for n, v in terms if n != SIZE_TERM)


