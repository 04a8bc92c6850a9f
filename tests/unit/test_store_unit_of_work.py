"""The store's unit of work (issue 19 item 3): one Store per CLI command, a request composed in one
transaction (its quota counts, its rows and its event commit together, or nothing does), the
target tenant's networks read once per request, an offer decided in one transaction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from typer.testing import CliRunner

from gpufabric.cli import common
from gpufabric.cli.main import app
from gpufabric.domain.auth import LOCAL_ADMIN, Principal, Role
from gpufabric.domain.errors import QuotaError
from gpufabric.domain.models import Inventory
from gpufabric.domain.quotas import Quotas
from gpufabric.fabrics.ethernet.entries import EthernetPort
from gpufabric.store import db
from gpufabric.store.auth import EventLog
from gpufabric.store.core import Store
from gpufabric.store.moves import MoveLedger
from gpufabric.store.registry import parse_segments
from gpufabric.workflow.actions import Actions

from support.ports import port_node


def _store(tmp_path: Path) -> Store:
    store = Store.open(f"sqlite:///{tmp_path / 'uow.db'}")
    nodes = tuple(port_node(f"n{i}", ethernet=(EthernetPort(f"n{i}", "eth0", "leaf1", f"p{i}"),)) for i in (1, 2, 3))
    store.upsert_inventory(Inventory(nodes))
    for t in ("ta", "tb"):
        store.create_tenant(t)
        for net in ("a", "b"):
            store.create_network(f"{t}-{net}", t, parse_segments())
    return store


def test_one_store_per_cli_command_migrates_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A local ``node move`` used to open three Stores (its own, the engine's, the actions'), each
    running the Alembic upgrade: now every helper of one command shares one."""
    upgrades: list[object] = []
    real = db.upgrade
    monkeypatch.setattr(db, "upgrade", lambda engine: (upgrades.append(engine), real(engine))[1])
    monkeypatch.setenv("GPUFABRIC_HOME", str(tmp_path / "h1"))
    monkeypatch.delenv("GPUFABRIC_DB", raising=False)
    common.close_stores()
    try:
        a, r, s = common.actions(), common.reader(), common.open_store()
        assert a.store is s and r.store is s and len(upgrades) == 1
        monkeypatch.setenv("GPUFABRIC_HOME", str(tmp_path / "h2"))  # another store named: the old one is closed
        assert common.open_store() is not s and len(upgrades) == 2
    finally:
        common.close_stores()


def test_consecutive_commands_in_one_process_each_open_their_own_store(tmp_path: Path) -> None:
    runner = CliRunner()
    h1, h2 = tmp_path / "h1", tmp_path / "h2"
    assert runner.invoke(app, ["--home", str(h1), "tenant", "create", "ta"]).exit_code == 0
    out = runner.invoke(app, ["--home", str(h2), "tenant", "list", "--json"])
    assert out.exit_code == 0 and "ta" not in json.loads(out.stdout or "[]")
    again = runner.invoke(app, ["--home", str(h1), "tenant", "list", "--json"])
    assert again.exit_code == 0 and "ta" in json.dumps(json.loads(again.stdout))
    common.close_stores()


def _count_selects(store: Store, table: str) -> list[str]:
    seen: list[str] = []

    @event.listens_for(store.engine, "before_cursor_execute")
    def _on(_conn: Any, _cur: Any, statement: str, *_a: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and f"FROM {table}" in statement:
            seen.append(statement)

    return seen


def test_a_move_into_every_network_of_its_tenant_reads_the_networks_once(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        seen = _count_selects(store, "networks")
        (m,) = Actions(store, parse_segments).request_moves(LOCAL_ADMIN, ["n1"], "ta", None)
        assert m.networks == ("ta-a", "ta-b")  # every network of the tenant, by name
        assert len(seen) == 1, seen  # was 2: the workflow's list, then the request's checks
    finally:
        store.close()


def test_a_refused_request_writes_neither_its_moves_nor_its_ok_event(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        acts = Actions(store, parse_segments, quota=lambda: Quotas.from_dict({"leases": 1}))
        svc = Principal("neutron", Role.SERVICE)  # counted (only an admin is not)
        acts.create_lease(svc, "ta", "n1", ())  # a pending grant counts as a lease
        with pytest.raises(QuotaError, match="holds 1 leases of its quota 1"):
            acts.create_lease(svc, "ta", "n2", ())  # counted in the grant's own transaction
        assert [m.node for m in MoveLedger(store).open_moves()] == ["n1"]
        events = [(e.action, e.target, e.outcome) for e in EventLog(store).list()]
        assert events == [("lease.create", "n2", "error"), ("lease.create", "n1", "ok")]
    finally:
        store.close()


def test_an_offer_accepted_writes_its_status_and_its_event_in_one_transaction(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        from gpufabric.store import tenants as tenant_admin

        tenant_admin.set_node_owner(store, "n1", "ta")
        acts = Actions(store, parse_segments)
        offer = acts.create_lease(Principal("o", Role.OWNER, "ta"), "tb", "n1", ())
        assert offer.status.value == "offered"
        commits: list[int] = []
        event.listen(store.engine, "commit", lambda _c: commits.append(1))
        accepted = acts.decide_offer(Principal("l", Role.LESSEE, "tb"), offer.id or 0, True)
        assert len(commits) == 1  # was 4 on 2860902 (quota counts, permission reads, the status + event apart)
        assert accepted.status.value == "pending" and store.node("n1").state.value == "moving"
        assert EventLog(store).list()[0].action == "offer.accept"
    finally:
        store.close()
