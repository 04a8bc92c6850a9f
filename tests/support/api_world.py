"""A store with an inventory, tenants, networks, leases and one token per role, and an
API context over it: shared by the API tests, the schemathesis run and the API bench."""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpufabric.api.deps import ApiContext
from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.models import Lease, NodeState
from gpufabric.store.core import Store
from gpufabric.store.registry import parse_segments
from gpufabric.workflow.actions import Actions
from gpufabric.workflow.inventory import inventory_from_dict


def inventory(n: int, eth: int = 2, ib: int = 8, gpus: int = 8) -> dict[str, Any]:
    nodes = []
    for i in range(n):
        nodes.append(
            {
                "name": f"gpu-{i:04d}",
                "offering": "baremetal",
                "ethernet": [
                    {"name": f"eth{e}", "switch": f"leaf-{e}-{i // 48}", "switch_port": f"Ethernet{i % 48 + 1}"}
                    for e in range(eth)
                ],
                "ib": [
                    {
                        "device": f"mlx5_{j}",
                        "port_num": 1,
                        "port_guid": f"0x0002c903{i:04x}{j:04x}",
                        "node_guid": f"0x0002c904{i:04x}{j:04x}",
                    }
                    for j in range(ib)
                ],
                "gpus": [{"module_id": g + 1} for g in range(gpus)],
            }
        )
    return {"version": 1, "nodes": nodes}


@dataclass
class World:
    store: Store
    ctx: ApiContext
    tokens: dict[str, str]  # admin, owner-alpha, lessee-alpha, lessee-beta, service
    leases: dict[str, int]  # node -> lease id

    def headers(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}


def build_world(home: Path, nodes: int = 6, leased: int = 2, url: str | None = None) -> World:
    store = Store.open(url or f"sqlite:///{home}/gpufabric.db")
    cfg = parse_segments()
    act = Actions(store, lambda: cfg)
    act.import_inventory(LOCAL_ADMIN, inventory_from_dict(inventory(nodes)))
    for t in ("alpha", "beta"):
        act.create_tenant(LOCAL_ADMIN, t)
        act.create_network(LOCAL_ADMIN, f"{t}-net", t)
    act.create_network(LOCAL_ADMIN, "shared-name", "alpha")
    act.create_network(LOCAL_ADMIN, "shared-name", "beta")  # names are per tenant
    leases: dict[str, int] = {}
    for i in range(leased):
        t = "alpha" if i % 2 == 0 else "beta"
        # as a finished grant leaves them (the workflow itself is exercised by the e2e tests)
        lease = store.create_lease(Lease(t, f"gpu-{i:04d}", datetime.now(UTC), None, (f"{t}-net",)))
        store.set_node_state(f"gpu-{i:04d}", NodeState.LEASED)
        assert lease.id is not None
        leases[f"gpu-{i:04d}"] = lease.id
    act.set_owner(LOCAL_ADMIN, f"gpu-{nodes - 1:04d}", "alpha")
    tokens = {
        "admin": act.create_token(LOCAL_ADMIN, "ops", "admin", None)[1],
        "owner-alpha": act.create_token(LOCAL_ADMIN, "alpha-owner", "owner", "alpha")[1],
        "lessee-alpha": act.create_token(LOCAL_ADMIN, "alpha-user", "lessee", "alpha")[1],
        "lessee-beta": act.create_token(LOCAL_ADMIN, "beta-user", "lessee", "beta")[1],
        "service": act.create_token(LOCAL_ADMIN, "neutron", "service", None)[1],
    }
    ctx = ApiContext(store, lambda: cfg)
    return World(store, ctx, tokens, leases)


def clone_world(template: World, dest: Path) -> World:
    """A fresh copy of ``template``'s store (same tokens and leases) under ``dest``: a file copy
    of the SQLite database after a checkpoint, far faster than building the world again."""
    src = template.store.url.removeprefix("sqlite:///")
    with sqlite3.connect(src) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest / "gpufabric.db")
    store = Store.open(f"sqlite:///{dest}/gpufabric.db")
    cfg = parse_segments()
    return World(store, ApiContext(store, lambda: cfg), template.tokens, template.leases)
