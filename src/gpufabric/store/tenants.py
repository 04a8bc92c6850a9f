"""Store operations the API and CLI verbs added on top of :class:`Store` (tenant admin): tenant delete
(refused while leases or networks use it or it owns nodes, naming them; the offers made into or by
it are withdrawn, its tokens revoked: a tenant re-created under the name inherits nothing), networks adopted with explicit
segments (the Neutron integration), lease network changes (lease ends go through the tenancy workflow),
node owners (a change withdraws the node's open offers: they were the old owner's). One transaction each; domain objects in and out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from gpufabric.domain.auth import LOCAL_ADMIN, Principal
from gpufabric.domain.errors import ConflictError, NotFoundError, ValidationError
from gpufabric.domain.models import Lease, Network, Node, Tenant
from gpufabric.domain.moves import MoveStatus
from gpufabric.domain.segments import SegmentConfig
from gpufabric.domain.values import check_description, check_name, check_tags
from gpufabric.store.convert import lease_to_domain, network_to_domain, segment_row
from gpufabric.store.core import Store, network_row, sibling_instances, used_segments
from gpufabric.store.leases import _LOAD as LEASE_LOAD
from gpufabric.store.offers import withdraw
from gpufabric.store.registry import Registry
from gpufabric.store.tables import (
    LeaseNetworkRow,
    LeaseRow,
    MoveRow,
    NetworkRow,
    NodeRow,
    TenantRow,
    TokenRow,
    lease_active_at,
    lease_not_over_at,
)
from gpufabric.store.tx import Tx


def delete_tenant(store: Store, name: str, by: Principal = LOCAL_ADMIN) -> Tenant:
    """Delete tenant ``name``: refused (ConflictError naming them) while a live lease or a network
    uses it or it owns nodes (give them another owner first: that withdraws its offers); its ended
    leases go, the offers made into or by it are withdrawn (events by ``by``, in no tenant's feed:
    a new tenant of the name reads none) and its tokens revoked."""
    with store.tx() as tx:
        s = tx.session
        row = s.scalar(select(TenantRow).where(TenantRow.name == name))
        if row is None:
            raise NotFoundError("tenant", name)
        now = datetime.now(UTC)
        live = lease_not_over_at(now)
        leases = sorted(s.scalars(select(LeaseRow.id).where(LeaseRow.tenant_id == row.id, live)))
        nets = sorted(s.scalars(select(NetworkRow.name).where(NetworkRow.tenant_id == row.id)))
        owned = sorted(s.scalars(select(NodeRow.name).where(NodeRow.owner == name)))
        if leases or nets or owned:
            uses = []
            if leases:
                uses.append(f"lease(s) {', '.join(map(str, leases))}")
            if nets:
                uses.append(f"network(s) {', '.join(nets)}")
            what = f"is still used by {' and '.join(uses)}" if uses else ""
            if owned:
                what += f"{' and ' if what else ''}owns node(s) {', '.join(owned)} (set their owner first)"
            raise ConflictError(f"tenant {name} {what}", tenant=name, leases=leases, networks=nets, nodes=owned)
        withdraw(s, by, f"offer withdrawn: tenant {name} deleted", tenant=name, feed=False)
        for old in s.scalars(select(LeaseRow).where(LeaseRow.tenant_id == row.id)):
            s.delete(old)  # ended leases only (live ones refused above); the event log keeps the history
        s.flush()
        s.delete(row)
        for tok in s.scalars(select(TokenRow).where(TokenRow.tenant == name, TokenRow.revoked_at.is_(None))):
            tok.revoked_at = now  # a tenant's tokens die with it (a new tenant of that name gets none)
        return Tenant(name)


def spanned(kinds: Sequence[Any], fabrics: Sequence[str] | None, field: str = "fabrics") -> list[str] | None:
    """The names of the instances of ``kinds`` a new network spans: ``fabrics`` (None: all).
    ValidationError naming ``field`` for a name that is no configured instance, or one whose
    kind gives networks no segment (e.g. nvlink), listing the instances it may name."""
    if fabrics is None:
        return None
    names = [k.instance for k in kinds if k.allocates]
    allowed = ", ".join(names) or "none"
    by_name = {k.instance: k for k in kinds}
    for f in fabrics:
        if f not in by_name:
            raise ValidationError(field, f, f"configured fabric instances: {allowed}")
        if not by_name[f].allocates:
            raise ValidationError(
                field, f, f"configured fabric instances: {allowed}", f"fabric {f} has no per-network segment"
            )
    if not fabrics:
        raise ValidationError(field, [], f"at least one of {allowed}")
    return list(dict.fromkeys(fabrics))


def adopt_network(
    store: Store,
    name: str,
    tenant: str,
    cfg: SegmentConfig,
    segments: dict[str, int],
    kinds: Sequence[Any] | None = None,
    fabrics: Sequence[str] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    tx: Tx | None = None,
    about: Network | None = None,
) -> Network:
    """Create a network with exactly the given segmentation ids (fabric instance -> id, each
    checked by its kind's :meth:`~gpufabric.domain.fabric.FabricKind.adopt` against ``cfg`` and
    the ids of the kind's instances), or, with none given, one allocated per fabric instance.
    An adopted network (Neutron's) gets no segment on an instance it did not name: an IB network
    never lands on an Ethernet switch, nor the reverse. ConflictError when an id is taken;
    ValidationError out of range or for an instance that is not configured or takes no explicit
    ids. ``kinds``: the configured fabric instances (None: every registered kind's default one).
    ``fabrics``: the instances the network spans (:func:`spanned`; None: all, or with explicit
    segments, theirs; given with segments it must name exactly theirs). ``options``: instance ->
    the network's own settings there (:func:`checked_options`). ``tx``: the caller's transaction
    (where its quota was checked), the network written in a savepoint of it. ``about``: its description and tags.
    One transaction: nothing is written on any error."""
    check_name("network.name", name)
    instances = list(kinds) if kinds is not None else Registry.from_entry_points().ordered_kinds()
    chosen = spanned(instances, fabrics)
    spans = set(segments) or (set(chosen) if chosen is not None else {k.instance for k in instances if k.allocates})
    opts = checked_options(instances, spans, options or {})
    if not segments:
        return store.create_network(name, tenant, cfg, instances, chosen, opts, tx, about)
    if fabrics is not None and set(fabrics) != set(segments):
        raise ValidationError(
            "fabrics", list(fabrics), f"the instances of the explicit segments ({', '.join(segments)}), or left out"
        )
    by_name = {k.instance: k for k in instances}
    probe = Network(name, tenant)
    for instance, seg in segments.items():
        if instance not in by_name:
            names = [k.instance for k in instances if k.adopts]
            allowed = " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
            raise ValidationError("segments.fabric", instance, allowed or "none (no fabric takes explicit ids)")
        by_name[instance].adopt(probe, seg, (), cfg)  # range (and kind) checked before the store is read, as before
    try:
        with store.tx(tx) as t_x, t_x.session.begin_nested():
            s = t_x.session
            t = s.scalar(select(TenantRow).where(TenantRow.name == tenant))
            if t is None:
                raise NotFoundError("tenant", tenant)
            if s.scalar(select(NetworkRow.id).where(NetworkRow.name == name, NetworkRow.tenant_id == t.id)):
                raise ConflictError(f"network already exists in tenant {tenant}: {name}", network=name, tenant=tenant)
            used = used_segments(s)
            row = network_row(name, t, about)
            for kind in (k for k in by_name.values() if k.instance in segments):  # the instances' order
                siblings = sibling_instances(kind, instances)
                got = kind.adopt(probe, segments[kind.instance], [x for x in used if x.fabric in siblings], cfg)
                got = dataclasses.replace(got, options=opts.get(kind.instance, ()))
                used.append(dataclasses.replace(got, fabric=kind.instance))
                row.segments.append(segment_row(kind.instance, got))
            s.add(row)
            s.flush()
            return network_to_domain(row)
    except IntegrityError as e:
        raise ConflictError(f"a segment of network {name} was taken concurrently: {e.orig}", network=name) from e


OPEN_MOVES: tuple[str, ...] = (MoveStatus.PENDING, MoveStatus.RUNNING, MoveStatus.FAILED, MoveStatus.OFFERED)
"""The moves whose lease is still to start: they name their networks (``moves.networks``)."""


def update_network(store: Store, name: str, tenant: str, new_name: str | None = None, description: str | None = None,
                   tags: Sequence[str] | None = None) -> Network:  # fmt: skip
    """Change network ``tenant``/``name``'s name, description or tags (None: keep it); its
    segments never change. Every value is checked before anything is written; a name another
    network of the tenant has is a ConflictError naming ``name``. A move still to start that
    joins the network is renamed with it (a lease names its networks by row, a move by name).
    One transaction: nothing is written on any error."""
    with store.tx() as tx:
        s = tx.session
        row = s.scalar(
            select(NetworkRow).join(TenantRow, NetworkRow.tenant_id == TenantRow.id)
            .where(NetworkRow.name == name, TenantRow.name == tenant).with_for_update(of=NetworkRow)
        )  # fmt: skip
        if row is None:
            raise NotFoundError("network", f"{tenant}/{name}")
        new = Network(
            check_name("name", new_name) if new_name is not None else row.name,
            tenant,
            description=check_description("description", description) if description is not None else row.description,
            tags=check_tags("tags", tags) if tags is not None else tuple(row.tags or ()),
        )  # fmt: skip
        if new.name != row.name:
            taken = select(NetworkRow.id).where(NetworkRow.tenant_id == row.tenant_id, NetworkRow.name == new.name)
            if s.scalar(taken) is not None:
                raise _taken(tenant, new.name)
            _rename_in_moves(s, tenant, row.name, new.name)
        row.name, row.description, row.tags = new.name, new.description, list(new.tags)
        try:
            s.flush()
        except IntegrityError as e:  # another replica took the name meanwhile
            raise _taken(tenant, new.name) from e
        return network_to_domain(row)


def _taken(tenant: str, name: str) -> ConflictError:
    return ConflictError(f"network already exists in tenant {tenant}: {name}", field="name", value=name,
                         allowed=f"a name no other network of tenant {tenant} has")  # fmt: skip


def _rename_in_moves(s: Any, tenant: str, old: str, new: str) -> None:
    """Moves into ``tenant`` still to start join ``new`` where they named ``old``."""
    q = select(MoveRow).where(MoveRow.to_tenant == tenant, MoveRow.status.in_(OPEN_MOVES), MoveRow.networks != "")
    for m in s.scalars(q):
        names = m.networks.split(",")
        if old in names:
            m.networks = ",".join(new if n == old else n for n in names)


def checked_options(
    instances: Sequence[Any], spans: Collection[str], raw: Mapping[str, Mapping[str, Any]]
) -> dict[str, tuple[tuple[str, int | bool], ...]]:
    """``raw`` (instance -> the network's own settings there) validated by each instance's kind
    (``FabricKind.segment_options``, errors naming ``options.<instance>.<key>``); an instance
    the network does not span is refused naming ``options``. Before anything is written."""
    by_name = {k.instance: k for k in instances}
    out = {}
    for instance, values in raw.items():
        if instance not in spans or instance not in by_name:
            raise ValidationError("options", instance, f"an instance the network spans ({', '.join(sorted(spans))})")
        if not isinstance(values, Mapping):
            raise ValidationError(f"options.{instance}", values, "a mapping of option: value")
        out[instance] = by_name[instance].segment_options(values, f"options.{instance}")
    return out


def active_lease(store: Store, node: str) -> Lease | None:
    now = datetime.now(UTC)
    with store.tx() as tx:
        s = tx.session
        q = (
            select(LeaseRow)
            .join(NodeRow, LeaseRow.node_id == NodeRow.id)
            .options(*LEASE_LOAD)
            .where(NodeRow.name == node, lease_active_at(now))
        )
        row = s.scalars(q).first()
        return None if row is None else lease_to_domain(row)


def set_lease_networks(store: Store, lease_id: int, networks: tuple[str, ...]) -> Lease:
    """Replace a lease's networks (all of its own tenant's)."""
    with store.tx() as tx:
        s = tx.session
        row = s.scalar(select(LeaseRow).options(*LEASE_LOAD).where(LeaseRow.id == lease_id))
        if row is None:
            raise NotFoundError("lease", str(lease_id))
        nets = []
        for name in dict.fromkeys(networks):
            n = s.scalar(select(NetworkRow).where(NetworkRow.name == name, NetworkRow.tenant_id == row.tenant_id))
            if n is None:
                raise NotFoundError("network", f"{row.tenant.name}/{name}")
            nets.append(n)
        row.networks.clear()
        s.flush()
        row.networks.extend(LeaseNetworkRow(network=n) for n in nets)
        s.flush()
        return lease_to_domain(row)


def set_node_owner(store: Store, node: str, owner: str | None, by: Principal = LOCAL_ADMIN) -> Node:
    """Make ``owner`` (None: nobody) the owner of ``node``; a change withdraws the node's open
    offers (its old owner's grants), each with an event by ``by`` in the receiving tenant's feed."""
    with store.tx() as tx:
        s = tx.session
        row = s.scalar(select(NodeRow).where(NodeRow.name == node).with_for_update())
        if row is None:
            raise NotFoundError("node", node)
        if owner is not None and s.scalar(select(TenantRow.id).where(TenantRow.name == owner)) is None:
            raise NotFoundError("tenant", owner)
        if row.owner != owner:
            why = f"offer withdrawn: the node's owner changed from {row.owner or 'none'} to {owner or 'none'}"
            withdraw(s, by, why, node=node)
        row.owner = owner
    return store.node(node)


def node_owner(store: Store, node: str, tx: Tx | None = None) -> str | None:
    with store.tx(tx) as tx:
        s = tx.session
        row = s.scalar(select(NodeRow).where(NodeRow.name == node))
        if row is None:
            raise NotFoundError("node", node)
        return row.owner
