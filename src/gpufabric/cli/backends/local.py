"""The local backend: each step of a command done directly on the store (as the local operator,
admin), behind the same methods as :class:`gpufabric.cli.backends.remote.Remote`
(:class:`gpufabric.cli.backends.base.Backend`) — so a command has one
path, and prints the same JSON whether it acts here or through ``--api``.

Reads are the API's own queries (:class:`~gpufabric.store.queries.Reader`, the same shapes);
writes are the API's own workflow (:class:`~gpufabric.workflow.actions.Actions`). Moves differ
only in who runs them: here the command's own engine (``run``), there the server's worker."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gpufabric.cli.backends.base import ALL
from gpufabric.cli.common import actions, fabrics_path, open_engine, open_store, reader
from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.errors import NotFoundError

if TYPE_CHECKING:
    from gpufabric.audit import AuditReport
    from gpufabric.cli.backends.base import Terms
    from gpufabric.domain.models import Inventory


class Local:
    """The store of this command (``open_store``), no server."""

    remote = False

    def __init__(self) -> None:
        self._opened: Any = None

    def engine(self, progress: Any = None) -> Any:
        """The move engine over the store and fabrics.yaml, opened once (before any write that needs it)."""
        if self._opened is None:
            self._opened = open_engine(progress=progress)
        return self._opened

    # ---- nodes
    def nodes(self, tenant: str | None = None, state: str | None = None) -> list[dict[str, Any]]:
        return self._nodes(tenant, state)

    def _nodes(self, tenant: str | None = None, state: str | None = None, name: str | None = None) -> list[dict[str, Any]]:
        """As ``GET /nodes``: each with every configured fabric instance's view (``fabrics``)."""
        from gpufabric.engine.columns import configured_kinds, with_fabrics

        rd = reader()
        found = rd.nodes(LOCAL_ADMIN, 1 if name else ALL, 0, tenant, state, name=name)[0]
        return with_fabrics(found, rd.store, configured_kinds(fabrics_path())) if found else []

    def node(self, name: str) -> dict[str, Any]:
        found = self._nodes(name=name)
        if not found:
            raise NotFoundError("node", name)
        return found[0]

    def set_owner(self, name: str, tenant: str | None) -> None:
        actions().set_owner(LOCAL_ADMIN, name, tenant)

    # ---- tenants, networks, offerings
    def tenants(self) -> list[dict[str, Any]]:
        return list(reader().tenants(LOCAL_ADMIN, ALL, 0)[0])

    def create_tenant(self, name: str) -> dict[str, Any]:
        actions().create_tenant(LOCAL_ADMIN, name)
        return dict(reader().tenants(LOCAL_ADMIN, 1, 0, name)[0][0])

    def delete_tenant(self, name: str) -> dict[str, Any]:
        return {"name": actions().delete_tenant(LOCAL_ADMIN, name).name}

    def networks(self, tenant: str | None = None) -> list[dict[str, Any]]:
        return _labelled(reader().networks(LOCAL_ADMIN, ALL, 0, tenant)[0])

    def create_network(self, name: str, tenant: str, fabrics: list[str] | None,
                       options: dict[str, dict[str, int | bool]] | None, description: str = "",
                       tags: Sequence[str] = ()) -> dict[str, Any]:  # fmt: skip
        actions().create_network(LOCAL_ADMIN, name, tenant, fabrics=fabrics, options=options or None,
                                 description=description, tags=tags)  # fmt: skip
        return _labelled(reader().networks(LOCAL_ADMIN, 1, 0, tenant, name)[0])[0]

    def update_network(self, name: str, tenant: str, new_name: str | None, description: str | None,
                       tags: Sequence[str] | None) -> dict[str, Any]:  # fmt: skip
        n = actions().update_network(LOCAL_ADMIN, name, tenant, new_name, description, tags)
        return _labelled(reader().networks(LOCAL_ADMIN, 1, 0, tenant, n.name)[0])[0]

    def delete_network(self, name: str, tenant: str) -> dict[str, Any]:
        found = reader().networks(LOCAL_ADMIN, 1, 0, tenant, name)[0]
        if not found:
            raise NotFoundError("network", f"{tenant}/{name}")
        actions().delete_network(LOCAL_ADMIN, name, tenant)
        return _labelled(found)[0]

    def offerings(self) -> list[dict[str, Any]]:
        return list(reader().offerings(ALL, 0)[0])

    def offering(self, name: str) -> dict[str, Any]:
        found = reader().offerings(1, 0, name)[0]
        if not found:
            raise NotFoundError("offering", name)
        return dict(found[0])

    # ---- leases, offers, moves
    def leases(self) -> list[dict[str, Any]]:
        return list(reader().leases(LOCAL_ADMIN, ALL, 0)[0])

    def offers(self) -> list[dict[str, Any]]:
        return list(reader().moves(LOCAL_ADMIN, ALL, 0, state="offered")[0])

    def decide_offer(self, move_id: int, accept: bool) -> dict[str, Any]:
        from gpufabric.domain.move_json import move_out

        return move_out(actions().decide_offer(LOCAL_ADMIN, move_id, accept))

    def moves(self) -> list[dict[str, Any]]:
        return list(reader().moves(LOCAL_ADMIN, ALL, 0)[0])

    def move(self, move_id: int) -> dict[str, Any]:
        from gpufabric.cli.move_run import local_details

        found = local_details(open_store(), [move_id])  # as GET /moves/{id} answers it
        if not found:
            raise NotFoundError("move", str(move_id))
        return found[0]

    def cancel_move(self, move_id: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        m = actions().cancel_move(LOCAL_ADMIN, move_id)
        assert m.id is not None
        events, row = reader().move_progress(LOCAL_ADMIN, m.id)
        assert row is not None
        return dict(row), list(events)

    def preview(self, node: str, terms: Terms, progress: Any = None) -> dict[str, Any]:
        """The plans of a move per phase, as ``POST /moves/preview`` answers them."""
        from gpufabric.domain.models import QUARANTINE

        store = open_store()
        store.node(node)  # "node not found" before anything needs the fabrics
        engine = self.engine(progress)
        to, nets = terms.to_tenant, terms.networks
        if nets is None:  # as a move request: every network of the tenant
            nets = () if to == QUARANTINE else tuple(n.name for n in store.networks(to))
        plans = engine.preview(node, to, nets, terms=terms.lease_terms, offering=terms.offering)
        return {"phases": {k: v.to_dict() for k, v in plans.items()}, "lines": {k: v.lines() for k, v in plans.items()}}

    def request_moves(self, nodes: Sequence[str], terms: Terms) -> list[int]:
        store = open_store()
        for node in nodes:
            store.node(node)  # "node not found" before anything needs the fabrics
        self.engine()  # a broken fabrics.yaml refuses before the request is recorded
        t = terms
        moves = actions().request_moves(LOCAL_ADMIN, list(nodes), t.to_tenant, t.networks, t.offering, t.lease_terms)
        return [m.id for m in moves if m.id is not None]

    def create_lease(self, node: str, terms: Terms) -> list[int]:
        open_store().node(node)
        self.engine()
        t = terms
        move = actions().create_lease(LOCAL_ADMIN, t.to_tenant, node, t.networks, t.offering, t.start, t.end, t.lease_terms, slot=t.slot)
        return [move.id] if move.id is not None else []

    def end_lease(self, lease_id: int) -> tuple[dict[str, Any], list[int]]:
        """The lease as ``DELETE /leases/{id}`` answers it and the move that releases its node (none: not active)."""
        from datetime import UTC

        from gpufabric.domain.move_json import lease_out
        from gpufabric.store.registry import registered_terms

        lease, move = actions().end_lease(LOCAL_ADMIN, lease_id)
        out = lease_out(lease, datetime.now(UTC), [t.name for t in registered_terms()])
        return out, [move.id] if move is not None and move.id is not None else []

    def run(self, move_ids: list[int], json_out: bool, window: float = 0.0) -> None:
        """Run the requested moves here (or follow them when a running worker took them first)."""
        from gpufabric.cli.move_run import run_requested

        run_requested(self.engine(), move_ids, json_out, window)

    # ---- inventory
    def import_inventory(self, inv: Inventory, instances: Any = None) -> dict[str, Any]:
        """An inventory parsed here, imported on the store (which refuses a port key another node holds)."""
        from gpufabric.domain.serial import jsonable

        out: dict[str, Any] = jsonable(actions().import_inventory(LOCAL_ADMIN, inv))
        return out

    def import_format(self, name: str, fmt: Any, text: str, fabric: str | None, strict: bool,
                      confirm: tuple[str, ...] = ()) -> dict[str, Any]:  # fmt: skip
        """A kind format's text read here against fabrics.yaml and the store, then imported."""
        from gpufabric.cli.common import fabrics_yaml
        from gpufabric.store.registry import Registry
        from gpufabric.workflow import kind_import

        fabrics = fabrics_yaml()
        registry = Registry.from_entry_points(drivers=False) if fabrics else None
        return kind_import.imported(actions(), LOCAL_ADMIN, name, fmt, text, fabrics, fabric, strict, registry, confirm)

    def audit(self, only: tuple[str, ...] = ()) -> AuditReport:
        """Every fabric of fabrics.yaml read now, the invariants checked against the store."""
        from gpufabric.engine.audit_run import audit

        return audit(self.engine(), only=list(only) or None)

    # ---- tokens, events
    def tokens(self) -> list[dict[str, Any]]:
        from gpufabric.store.auth import Tokens

        return [t.to_dict() for t in Tokens(open_store()).list()]

    def create_token(self, name: str, role: str, tenant: str | None, expires_at: datetime | None) -> dict[str, Any]:
        info, secret = actions().create_token(LOCAL_ADMIN, name, role, tenant, expires_at)
        return {**info.to_dict(), "secret": secret}

    def revoke_token(self, token_id: int) -> dict[str, Any]:
        out: dict[str, Any] = actions().revoke_token(LOCAL_ADMIN, token_id).to_dict()
        return out

    def events(self, limit: int, action: str | None) -> list[dict[str, Any]]:
        return list(reader().events(LOCAL_ADMIN, limit, 0, action)[0])


def _labelled(items: Any) -> list[dict[str, Any]]:
    """Network dicts with their segments labelled by the configured kinds (as the API answers them)."""
    from gpufabric.engine.columns import configured_kinds, with_segment_views

    return with_segment_views(items, configured_kinds(fabrics_path()))
