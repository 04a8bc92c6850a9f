"""The in-memory fabric kind owning its whole column, end to end through the CLI and the API
(in-process): ``inventory import`` (its section, into the generic table) -> ``network
create`` (its segment) -> ``node move`` -> ``audit`` (its check) -> ``GET /api/v1/nodes/N``
-> ``node list --json``. Its only wiring is one registration (``register(reg,
inventory=True)`` on the registry the commands build); nothing outside its folder names it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpufabric.cli.main import app
from gpufabric.domain.errors import GpufabricError
from gpufabric.store.registry import Registry

from support.memfabric import DRIFT_ID_MEMORY, register
from support.memfabric.kind import _SHARED

INVENTORY = {"version": 1, "nodes": [
    {"name": "n1", "fabrics": {"memory": [{"name": "m0", "link": 1}, {"name": "m1", "link": 2}]}},
    {"name": "n2", "fabrics": {"memory": [{"name": "m0", "link": 3}]}},
]}  # fmt: skip


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    shared = f"column-{tmp_path.name}"
    fabrics = {"fabrics": [{"name": "memory", "kind": "memory", "driver": "mem-tags", "options": {"shared": shared}}]}
    (tmp_path / "fabrics.yaml").write_text(yaml.safe_dump(fabrics))
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump(INVENTORY))
    plain = Registry.from_entry_points.__func__  # type: ignore[attr-defined]

    def with_memory(cls: type[Registry], *a: Any, **k: Any) -> Registry:
        reg: Registry = plain(cls, *a, **k)
        register(reg, inventory=True)  # the one registration
        return reg

    monkeypatch.setattr(Registry, "from_entry_points", classmethod(with_memory))
    monkeypatch.setenv("GPUFABRIC_HOME", str(tmp_path))
    monkeypatch.setenv("GPUFABRIC_DB", "")
    yield tmp_path
    _SHARED.pop(shared, None)


def cli(*args: str) -> Any:
    r = CliRunner().invoke(app, [*args, "--json"])
    if isinstance(r.exception, GpufabricError):
        raise r.exception
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.output)


def test_inventory_network_move_audit_api_and_node_list_through_the_memory_column(home: Path) -> None:
    imported = cli("inventory", "import", str(home / "inventory.yaml"))
    assert imported["result"]["added"] == 2
    cli("tenant", "create", "ta")
    net = cli("network", "create", "ta-net", "--tenant", "ta")
    assert {s["fabric"]: s["seg_id"] for s in net["segments"]}["memory"] == 1  # (every registered kind allocates)
    moved = cli("node", "move", "n1", "--to-tenant", "ta", "--network", "ta-net")
    assert moved["moves"][0]["status"] == "done", moved
    assert _SHARED[f"column-{home.name}"] == {"n1/m0": "ta@1", "n1/m1": "ta@1", "n2/m0": "quarantine"}

    report = cli("audit")
    assert DRIFT_ID_MEMORY in report["checked_invariants"] and report["violations"] == [], report["violations"]
    _SHARED[f"column-{home.name}"]["n1/m1"] = "tb"  # drift behind the control plane's back
    drift = [v for v in cli("audit")["violations"] if v["invariant"] == DRIFT_ID_MEMORY]
    assert [(v["fabric"], v["port"], v["node"]) for v in drift] == [("memory", "n1/m1", "n1")]

    from fastapi.testclient import TestClient

    from gpufabric.api.app import create_app
    from gpufabric.api.deps import ApiContext
    from gpufabric.cli.common import open_engine, segment_config
    from gpufabric.domain.auth import LOCAL_ADMIN
    from gpufabric.store.core import Store

    engine = open_engine()
    ctx = ApiContext(Store.open(home=home), segment_config, engine=lambda: engine,
                     view_kinds=lambda: tuple(engine.fabrics.kinds.values()))
    token = ctx.actions.create_token(LOCAL_ADMIN, "ops", "admin", None)[1]
    http = TestClient(create_app(ctx))
    auth = {"Authorization": f"Bearer {token}"}
    got = http.get("/api/v1/nodes/n1", headers=auth)
    assert got.status_code == 200, got.text
    assert got.json()["tenant"] == "ta"
    mem = {"ports": [{"name": "m0", "link": 1}, {"name": "m1", "link": 2}]}
    assert got.json()["fabrics"] == {"memory": {"summary": "m0:1 m1:2", **mem}}, got.json()["fabrics"]
    assert engine.fabrics.node_views(engine.store.node("n1")) == {
        "memory": {"ports": [{"name": "m0", "link": 1}, {"name": "m1", "link": 2}]}
    }
    again = http.post("/api/v1/inventory", headers=auth, json={"version": 1, "nodes": [
        {"name": "n3", "fabrics": {"memory": [{"name": "m0", "link": 4}]}}]})  # fmt: skip
    assert again.status_code == 200 and again.json()["added"] == 1, again.text
    assert engine.fabrics.kinds["memory"].ports(engine.store.node("n3"))[0].link == 4
    bad = http.post("/api/v1/inventory", headers=auth, json={"version": 1, "nodes": [
        {"name": "n4", "fabrics": {"memory": [{"name": "m0", "link": 4}]}}]})  # fmt: skip
    assert bad.status_code == 409 and "already belongs to node n3" in bad.text, bad.text  # the kind's key, unique store-wide
    assert http.get("/api/v1/nodes/n4", headers=auth).status_code == 404  # nothing written

    listed = cli("node", "list")
    rows = listed if isinstance(listed, list) else listed["items"]
    assert {r["name"]: r["tenant"] for r in rows} == {"n1": "ta", "n2": "quarantine", "n3": "quarantine"}
    assert {r["name"]: r["fabrics"] for r in rows}["n1"] == {"memory": {"summary": "m0:1 m1:2", **mem}}
