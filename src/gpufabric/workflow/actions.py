"""Every write, for every caller: authorised for its principal and appended to the event log.

The API and the CLI both call :class:`Actions` (the CLI as :data:`LOCAL_ADMIN`). A role that
lacks a verb gets ForbiddenError (403); an object the principal may not see is NotFoundError
(404), exactly as if it did not exist. ``on_change`` tells the serve process's worker that
the fabrics must follow the store (``"converge"``) or that moves are queued (``"moves"``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from datetime import datetime
from typing import Any, TypeVar

from gpufabric.domain.auth import Principal, Role, Verb
from gpufabric.domain.errors import ConflictError, ForbiddenError, GpufabricError, NotFoundError
from gpufabric.domain.models import QUARANTINE, Inventory, Lease, Network, Node, Tenant
from gpufabric.domain.moves import Move
from gpufabric.domain.quotas import Quotas
from gpufabric.domain.segments import SegmentConfig
from gpufabric.domain.terms import LeaseTerms
from gpufabric.domain.values import check_description, check_id, check_tags
from gpufabric.store import tenants as tenant_admin
from gpufabric.store.auth import EventLog, TokenInfo, Tokens
from gpufabric.store.core import ImportResult, Store
from gpufabric.store.moves import MoveLedger
from gpufabric.store.tx import Tx
from gpufabric.workflow import quotas
from gpufabric.workflow.tenancy import TenantWorkflow

R = TypeVar("R")
_WRITE_LOCKS: dict[str, threading.RLock] = {}


class Actions:
    def __init__(
        self,
        store: Store,
        cfg: Callable[[], SegmentConfig],
        on_change: Callable[[str], None] | None = None,
        quota: Callable[[], Quotas] = Quotas,
        network_kinds: Callable[[], Sequence[Any] | None] = lambda: None,
    ) -> None:
        self.store = store
        self.cfg = cfg
        self.quota = quota
        self.network_kinds = network_kinds  # the fabric instances: a new network spans them, a request is checked by them (None: every kind)
        self.events = EventLog(store)
        self.tokens = Tokens(store)
        self.on_change = on_change or (lambda _what: None)
        self._write_lock = _WRITE_LOCKS.setdefault(store.url, threading.RLock())

    def _do(self, p: Principal, action: str, target: str, tenant: str | None, fn: Callable[[], R]) -> R:
        # SQLite has one writer: queue this process's writers here rather than in SQLite's busy
        # handler (which sleeps up to 100 ms per retry under contention)
        with self._write_lock:
            return self._do_locked(p, action, target, tenant, fn)

    def _do_locked(self, p: Principal, action: str, target: str, tenant: str | None, fn: Callable[[], R]) -> R:
        try:
            result = fn()
        except GpufabricError as e:
            self._refused(p, action, target, e, tenant)
            self.on_change("write")
            raise
        self.events.record(p, action, target, True, "", tenant)
        self.on_change("write")
        return result

    def _refused(self, p: Principal, action: str, target: str, e: GpufabricError, tenant: str | None) -> None:
        """Log a refusal in the feed of the caller's own tenant, not the one it named: a failed
        attempt on tenant T by someone outside T tells T's feed nothing and tells T nothing."""
        feed = tenant if p.sees_all else p.tenant
        self.events.record(p, action, target, False, e.message, feed)

    # ------------------------------------------------------------------ visibility
    def _tenant_visible(self, p: Principal, tenant: str) -> None:
        if not p.sees_tenant(tenant):
            raise NotFoundError("tenant", tenant)

    def node_visible(self, p: Principal, node: str) -> None:
        """NotFoundError unless ``p`` may see ``node`` (lessee: leased by its tenant now; owner: owned)."""
        if p.sees_all:
            tenant_admin.node_owner(self.store, node)  # NotFoundError; no port graph loaded
            return
        if p.role is Role.OWNER:
            if tenant_admin.node_owner(self.store, node) != p.tenant:
                raise NotFoundError("node", node)
            return
        try:
            lease = tenant_admin.active_lease(self.store, node)
        except NotFoundError:
            lease = None
        if lease is None or lease.tenant != p.tenant:
            raise NotFoundError("node", node)

    # ------------------------------------------------------------------ tenants and networks
    def create_tenant(self, p: Principal, name: str) -> Tenant:
        p.require("tenant", Verb.CREATE)
        return self._do(p, "tenant.create", name, name, lambda: self.store.create_tenant(Tenant(name).name))

    def delete_tenant(self, p: Principal, name: str) -> Tenant:
        self._tenant_visible(p, name)
        p.require("tenant", Verb.DELETE)
        return self._do(p, "tenant.delete", name, name, lambda: tenant_admin.delete_tenant(self.store, name, p))

    def create_network(
        self,
        p: Principal,
        name: str,
        tenant: str,
        segments: dict[str, int] | None = None,
        fabrics: Sequence[str] | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        description: str = "",
        tags: Sequence[str] = (),
    ) -> Network:
        """A network of ``tenant`` spanning the instances ``fabrics`` (None: every configured one
        that allocates), with ``segments`` adopted (admin/service only), its own ``options``
        per instance (validated by the instance's kind), ``description`` and ``tags``."""
        self._tenant_visible(p, tenant)
        p.require("network", Verb.CREATE)
        if segments and not p.sees_all:
            raise ForbiddenError(
                "only an admin or a service token (the Neutron integration's) may adopt explicit segments",
                field="segments",
                value=p.role.value,
                allowed="admin, service",
            )
        def run() -> Network:
            about = Network(name, tenant, description=check_description("description", description),
                            tags=check_tags("tags", tags))  # fmt: skip
            with self.store.tx() as tx:  # counted and written in one transaction: replicas' checks serialise
                quotas.check(tx, self.quota(), p, tenant, "networks")
                return tenant_admin.adopt_network(
                    self.store,
                    about.name,
                    tenant,
                    self.cfg(),
                    segments or {},
                    self.network_kinds(),
                    fabrics,
                    options,
                    tx,
                    about,
                )

        return self._do(p, "network.create", f"{tenant}/{name}", tenant, run)

    def update_network(
        self,
        p: Principal,
        name: str,
        tenant: str,
        new_name: str | None = None,
        description: str | None = None,
        tags: Sequence[str] | None = None,
    ) -> Network:
        """Network ``tenant``/``name`` renamed, described or tagged (None: unchanged); its
        segments stay (:func:`~gpufabric.store.tenants.update_network`)."""
        self._tenant_visible(p, tenant)
        p.require("network", Verb.UPDATE)
        return self._do(
            p, "network.update", f"{tenant}/{name}", tenant,
            lambda: tenant_admin.update_network(self.store, name, tenant, new_name, description, tags),
        )  # fmt: skip

    def delete_network(self, p: Principal, name: str, tenant: str) -> Network:
        self._tenant_visible(p, tenant)
        p.require("network", Verb.DELETE)
        return self._do(p, "network.delete", f"{tenant}/{name}", tenant, lambda: self.store.delete_network(name, tenant))

    # ------------------------------------------------------------------ leases
    def create_lease(
        self,
        p: Principal,
        tenant: str,
        node: str,
        networks: tuple[str, ...] | None,
        offering: str = "baremetal",
        start: datetime | None = None,
        end: datetime | None = None,
        terms: LeaseTerms = (),
        slot: bool = False,
    ) -> Move:
        """Lease an available node (or a slot of a shared host: ``slot``, or a GPU count on a
        vm-host): the move from quarantine that grants it (the one workflow).
        An owner's lease into another tenant is recorded as an offer (see :meth:`decide_offer`);
        ``networks=None`` is every network of the tenant only for a principal of that tenant."""
        if not p.is_admin:
            self.node_visible(p, node)
        p.require("lease", Verb.CREATE)
        with self._write_lock:
            try:
                with self.store.tx() as tx:  # quotas counted, move requested, ok event: one commit per grant
                    quotas.check(tx, self.quota(), p, tenant, "leases", "open_moves")
                    move = TenantWorkflow(self.store, self.network_kinds).grant(
                        p, tenant, node, networks, offering, terms=terms, start=start, end=end, tx=tx, slot=slot
                    )
                    self.events.record(p, "lease.create", node, True, "", tenant, tx=tx)
            except GpufabricError as e:
                self._refused(p, "lease.create", node, e, tenant)
                self.on_change("write")
                raise
        self.on_change("moves")
        return move

    def decide_offer(self, p: Principal, move_id: int, accept: bool) -> Move:
        """Accept or decline an offered lease (the receiving tenant's owner/lessee token or an
        admin; the offering owner may withdraw it). Accepted, it runs as any grant."""
        p.require("offer", Verb.ACT)
        action = "offer.accept" if accept else "offer.decline"
        with self._write_lock:
            try:
                with self.store.tx() as tx:  # quotas, permission, status and the ok event: one transaction
                    if accept and p.tenant is not None:  # the offer counts against the tenant once accepted
                        quotas.check(tx, self.quota(), p, p.tenant, "leases", "open_moves")
                    move = TenantWorkflow(self.store, self.network_kinds).decide(p, move_id, accept, tx=tx)
                    self.events.record(p, action, str(move_id), True, "", p.tenant, tx=tx)
            except GpufabricError as e:
                self._refused(p, action, str(move_id), e, p.tenant)
                self.on_change("write")
                raise
        self.on_change("moves")
        return move

    def end_lease(self, p: Principal, lease_id: int) -> tuple[Lease, Move | None]:
        """End a lease now: its node's release (a move to quarantine); the lease row is kept."""
        p.require("lease", Verb.DELETE)
        try:
            lease = self.store.lease(check_id("lease_id", lease_id))
        except NotFoundError:
            raise NotFoundError("lease", str(lease_id)) from None
        visible = p.sees_all or lease.tenant == p.tenant
        if p.role is Role.OWNER and not visible:
            visible = tenant_admin.node_owner(self.store, lease.node) == p.tenant
        if not visible:
            raise NotFoundError("lease", str(lease_id))

        def run() -> tuple[Lease, Move | None]:
            ended = TenantWorkflow(self.store, self.network_kinds).end(p, lease_id)
            self.on_change("moves")
            return ended

        return self._do(p, "lease.end", str(lease_id), lease.tenant, run)

    # ------------------------------------------------------------------ moves and attachments
    def request_move(
        self,
        p: Principal,
        node: str,
        to_tenant: str,
        networks: tuple[str, ...] | None,
        offering: str = "baremetal",
        terms: LeaseTerms = (),
    ) -> Move:
        return self.request_moves(p, [node], to_tenant, networks, offering, terms)[0]

    def request_moves(
        self,
        p: Principal,
        nodes: Sequence[str],
        to_tenant: str,
        networks: tuple[str, ...] | None,
        offering: str = "baremetal",
        terms: LeaseTerms = (),
    ) -> list[Move]:
        """Move ``nodes`` to ``to_tenant`` with one request: recorded in one transaction with their
        events (all or none), then run by the worker as one batch."""
        if not p.is_admin:  # an admin sees every node: the request itself says "node not found"
            for node in nodes:
                self.node_visible(p, node)
        p.require("move", Verb.CREATE)
        tenant = None if to_tenant == QUARANTINE else to_tenant
        with self._write_lock:
            try:
                with self.store.tx() as tx:  # the ok events commit with the moves
                    moves = TenantWorkflow(self.store, self.network_kinds).move_many(p, nodes, to_tenant, networks, offering, terms, tx=tx)
                    for node in nodes:
                        self.events.record(p, "move.create", node, True, "", tenant, tx=tx)
            except GpufabricError as e:
                self._refused(p, "move.create", ",".join(nodes)[:255], e, tenant)
                self.on_change("write")
                raise
        self.on_change("moves")
        return moves

    def cancel_move(self, p: Principal, move_id: int) -> Move:
        """Cancel a pending or failed move (admin): see :mod:`gpufabric.store.move_cancel`."""
        from gpufabric.store import move_cancel
        from gpufabric.workflow.tenancy import who

        p.require("move", Verb.CREATE)
        move = MoveLedger(self.store).get(check_id("move_id", move_id))
        tenant = move.to_tenant if move.to_tenant != QUARANTINE else move.from_tenant

        def run() -> Move:
            cancelled = move_cancel.cancel(self.store, move_id, who(p))
            self.on_change("converge")  # the node's ports follow: quarantine, or back to its tenant
            return cancelled

        return self._do(p, "move.cancel", str(move_id), None if tenant == QUARANTINE else tenant, run)

    def attach(self, p: Principal, node: str, network: str, tenant: str) -> tuple[Move | None, Lease | None]:
        """Put ``node`` in ``tenant`` with ``network`` added: a move when the tenant changes
        (through quarantine), else the lease's networks grow and the fabrics converge."""
        self.node_visible(p, node)
        self._tenant_visible(p, tenant)
        p.require("node", Verb.ACT)

        def run() -> tuple[Move | None, Lease | None]:
            self.store.network(network, tenant)  # NotFoundError first
            current = tenant_admin.active_lease(self.store, node)
            if current is not None and current.tenant == tenant:
                if network in current.networks:
                    raise ConflictError(f"node {node} is already attached to {tenant}/{network}", node=node)
                assert current.id is not None
                lease = tenant_admin.set_lease_networks(self.store, current.id, (*current.networks, network))
                self.on_change("converge")
                return None, lease
            if current is not None:  # an attachment never takes a node from another tenant
                raise ConflictError(
                    f"node {node} is leased to another tenant: only a node in quarantine, or already in"
                    f" {tenant}, can be attached to {tenant}/{network}",
                    node=node,
                )  # fmt: skip
            with self.store.tx() as tx:  # counted in the move request's transaction
                quotas.check(tx, self.quota(), p, tenant, "open_moves", "leases")
                move = TenantWorkflow(self.store, self.network_kinds).move(p, node, tenant, (network,), "baremetal", tx=tx)
            self.on_change("moves")
            return move, None

        return self._do(p, "node.attach", f"{node}:{tenant}/{network}", tenant, run)

    def detach(self, p: Principal, node: str, network: str) -> tuple[Move | None, Lease | None]:
        """Release ``network`` from ``node``: its lease keeps its other networks, or the node
        goes to quarantine (a move) when it was the last."""
        self.node_visible(p, node)
        p.require("node", Verb.ACT)
        current = tenant_admin.active_lease(self.store, node)
        if current is None or network not in current.networks or not p.sees_tenant(current.tenant):
            raise NotFoundError("attachment", f"{node}/{network}")

        def run() -> tuple[Move | None, Lease | None]:
            rest = tuple(n for n in current.networks if n != network)
            if rest:
                assert current.id is not None
                lease = tenant_admin.set_lease_networks(self.store, current.id, rest)
                self.on_change("converge")
                return None, lease
            move = TenantWorkflow(self.store, self.network_kinds).move(p, node, QUARANTINE)
            self.on_change("moves")
            return move, None

        return self._do(p, "node.detach", f"{node}:{current.tenant}/{network}", current.tenant, run)

    # ------------------------------------------------------------------ inventory, owners, tokens
    def import_inventory(self, p: Principal, inv: Inventory) -> ImportResult:
        p.require("node", Verb.CREATE)
        return self._do(p, "inventory.import", f"{len(inv.nodes)} nodes", None, lambda: self.store.upsert_inventory(inv))

    def import_read(self, p: Principal, read: Callable[[Callable[[], Sequence[Node]]], R],
                    inventory: Callable[[R], Inventory]) -> tuple[R, ImportResult]:  # fmt: skip
        """A kind format's import as one unit of work: ``read`` is handed the store's nodes (its
        ``known``), read in the transaction that then writes ``inventory(what it read)`` and its
        event, so no lease or other import lands between what the read judged and the write
        (SQLite: that transaction's ``BEGIN IMMEDIATE`` holds the write lock from the read;
        PostgreSQL, READ COMMITTED: the node rows read are locked ``FOR UPDATE``, and a node or
        port key another transaction adds meanwhile is refused by the unique constraints). The
        transaction opens when ``read`` first asks (a text refused before that opens nothing)."""
        p.require("node", Verb.CREATE)
        done: R | None = None
        try:
            with ExitStack() as held:
                opened: list[Tx] = []

                def known() -> Sequence[Node]:
                    if not opened:
                        held.enter_context(self._write_lock)
                        opened.append(held.enter_context(self.store.tx()))
                    return self.store.nodes(opened[0], lock=True)

                done = read(known)
                if not opened:
                    held.enter_context(self._write_lock)
                inv = inventory(done)
                with self.store.tx(opened[0] if opened else None) as tx:
                    result = self.store.upsert_inventory(inv, within=tx)
                    self.events.record(p, "inventory.import", f"{len(inv.nodes)} nodes", True, "", None, tx=tx)
        except GpufabricError as e:
            if done is not None:  # refused by the store: recorded once its transaction is rolled back
                self._refused(p, "inventory.import", f"{len(inventory(done).nodes)} nodes", e, None)
                self.on_change("write")
            raise
        self.on_change("write")
        return done, result

    def set_owner(self, p: Principal, node: str, owner: str | None) -> Node:
        p.require("node", Verb.CREATE)
        return self._do(p, "node.owner", node, owner, lambda: tenant_admin.set_node_owner(self.store, node, owner, p))

    def create_token(
        self, p: Principal, name: str, role: str, tenant: str | None, expires_at: datetime | None = None
    ) -> tuple[TokenInfo, str]:
        p.require("token", Verb.CREATE)
        return self._do(p, "token.create", name, tenant, lambda: self.tokens.create(name, role, tenant, p, expires_at))

    def revoke_token(self, p: Principal, token_id: int) -> TokenInfo:
        p.require("token", Verb.DELETE)
        return self._do(p, "token.revoke", str(token_id), None, lambda: self.tokens.revoke(token_id))

    def record(self, p: Principal, action: str, target: str, ok: bool, message: str = "", **_: Any) -> None:
        self.events.record(p, action, target, ok, message)
