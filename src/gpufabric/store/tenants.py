"""Store operations the API and CLI verbs added on top of :class:`Store` (tenant admin): tenant delete
(refused while leases or networks use it, naming them), networks adopted with explicit
segments (the Neutron integration), lease network changes (lease ends go through the tenancy workflow),
node owners. One transaction each; domain objects in and out.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from gpufabric.domain.errors import ConflictError, NotFoundError, ValidationError
from gpufabric.domain.models import Fabric, Lease, Network, Node, Tenant
from gpufabric.domain.segments import SegmentConfig
from gpufabric.domain.values import check_name
from gpufabric.store.convert import lease_to_domain, network_to_domain
from gpufabric.store.core import Store
from gpufabric.store.leases import _LOAD as LEASE_LOAD
from gpufabric.store.tables import (
    LeaseNetworkRow,
    LeaseRow,
    NetworkRow,
    NodeRow,
    SegmentRow,
    TenantRow,
    TokenRow,
    lease_active_at,
    lease_not_over_at,
)
from gpufabric.store.tx import Tx


def delete_tenant(store: Store, name: str) -> Tenant:
    with store.tx() as tx:
        s = tx.session
        row = s.scalar(select(TenantRow).where(TenantRow.name == name))
        if row is None:
            raise NotFoundError("tenant", name)
        now = datetime.now(UTC)
        live = lease_not_over_at(now)
        leases = sorted(s.scalars(select(LeaseRow.id).where(LeaseRow.tenant_id == row.id, live)))
        nets = sorted(s.scalars(select(NetworkRow.name).where(NetworkRow.tenant_id == row.id)))
        if leases or nets:
            uses = []
            if leases:
                uses.append(f"lease(s) {', '.join(map(str, leases))}")
            if nets:
                uses.append(f"network(s) {', '.join(nets)}")
            raise ConflictError(
                f"tenant {name} is still used by {' and '.join(uses)}", tenant=name, leases=leases, networks=nets
            )
        for old in s.scalars(select(LeaseRow).where(LeaseRow.tenant_id == row.id)):
            s.delete(old)  # ended leases only (live ones refused above); the event log keeps the history
        s.flush()
        s.delete(row)
        for tok in s.scalars(select(TokenRow).where(TokenRow.tenant == name, TokenRow.revoked_at.is_(None))):
            tok.revoked_at = now  # a tenant's tokens die with it (a new tenant of that name gets none)
        return Tenant(name)


def adopt_network(
    store: Store, name: str, tenant: str, cfg: SegmentConfig, segments: dict[Fabric, int], kinds: Sequence[Any] | None = None
) -> Network:
    """Create a network with exactly the given segmentation ids (validated against ``cfg``), or,
    with none given, one allocated per fabric kind. An adopted network (Neutron's) gets no segment
    on a fabric it did not name: an IB network never lands on an Ethernet switch, nor the reverse.
    ConflictError when an id is taken; ValidationError out of range. ``kinds``: the fabric
    instances an allocated network spans (None: every registered kind's default instance)."""
    check_name("network.name", name)
    if not segments:
        return store.create_network(name, tenant, cfg, kinds)
    for fabric, seg in segments.items():
        if fabric is Fabric.ETHERNET and seg not in cfg.ethernet_vlans:
            raise ValidationError("segments.ethernet.seg_id", seg, str(cfg.ethernet_vlans))
        if fabric is Fabric.INFINIBAND and seg not in cfg.ib.seg_ids():
            raise ValidationError("segments.infiniband.seg_id", seg, str(cfg.ib.seg_range))
        if fabric not in (Fabric.ETHERNET, Fabric.INFINIBAND):
            raise ValidationError("segments.fabric", fabric.value, "ethernet or infiniband")
    try:
        with store.tx() as tx:
            s = tx.session
            t = s.scalar(select(TenantRow).where(TenantRow.name == tenant))
            if t is None:
                raise NotFoundError("tenant", tenant)
            if s.scalar(select(NetworkRow.id).where(NetworkRow.name == name, NetworkRow.tenant_id == t.id)):
                raise ConflictError(f"network already exists in tenant {tenant}: {name}", network=name, tenant=tenant)
            used = s.execute(select(SegmentRow.fabric, SegmentRow.seg_id, SegmentRow.pkey)).all()
            eth_used = {u.seg_id for u in used if u.fabric == Fabric.ETHERNET.value}
            ib_used = {u.seg_id for u in used if u.fabric == Fabric.INFINIBAND.value}
            pkeys = {u.pkey for u in used if u.pkey is not None}
            row = NetworkRow(name=name, tenant=t)
            vlan = segments.get(Fabric.ETHERNET)
            if vlan is not None:
                if vlan in eth_used:
                    raise ConflictError(f"ethernet segment {vlan} is already used", field="segments", value=vlan)
                row.segments.append(SegmentRow(fabric=Fabric.ETHERNET.value, seg_id=vlan, vlan=vlan))
            ib = segments.get(Fabric.INFINIBAND)
            if ib is not None:
                if ib in ib_used or cfg.ib.pkey_for(ib).value in pkeys:
                    raise ConflictError(f"infiniband segment {ib} is already used", field="segments", value=ib)
                row.segments.append(SegmentRow(fabric=Fabric.INFINIBAND.value, seg_id=ib, pkey=cfg.ib.pkey_for(ib).value))
            s.add(row)
            s.flush()
            return network_to_domain(row)
    except IntegrityError as e:
        raise ConflictError(f"a segment of network {name} was taken concurrently: {e.orig}", network=name) from e


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


def set_node_owner(store: Store, node: str, owner: str | None) -> Node:
    with store.tx() as tx:
        s = tx.session
        row = s.scalar(select(NodeRow).where(NodeRow.name == node))
        if row is None:
            raise NotFoundError("node", node)
        if owner is not None and s.scalar(select(TenantRow.id).where(TenantRow.name == owner)) is None:
            raise NotFoundError("tenant", owner)
        row.owner = owner
    return store.node(node)


def node_owner(store: Store, node: str, tx: Tx | None = None) -> str | None:
    with store.tx(tx) as tx:
        s = tx.session
        row = s.scalar(select(NodeRow).where(NodeRow.name == node))
        if row is None:
            raise NotFoundError("node", node)
        return row.owner
