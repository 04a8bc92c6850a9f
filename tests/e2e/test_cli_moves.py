"""``gpufabric move cancel ID [--json]`` without a lab, on a store made in tmp: what it prints,
the refusals (one line naming the field and the allowed values, exit 2, nothing changed)."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpufabric.domain.models import Inventory, Lease, NodeState
from gpufabric.domain.moves import MoveRequest
from gpufabric.fabrics.ethernet.entries import EthernetPort
from gpufabric.store.core import Store
from gpufabric.store.moves import MoveLedger
from gpufabric.store.registry import parse_segments

from e2e.conftest import GF
from support.ports import port_node


def _gf(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUFABRIC_HOME": str(home), "GPUFABRIC_DB": "", "GPUFABRIC_API": ""}
    return subprocess.run([GF, *args], env=env, capture_output=True, text=True, timeout=120, check=False)


def test_move_cancel_prints_what_happened_to_the_node_and_refuses_a_running_move(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'gpufabric.db'}")
    nodes = tuple(port_node(f"n{i}", ethernet=(EthernetPort(f"n{i}", "eth0", "leaf1", f"p{i}"),)) for i in (1, 2, 3))
    store.upsert_inventory(Inventory(nodes))
    for t in ("ta", "tb"):
        store.create_tenant(t)
        store.create_network(f"{t}-net", t, parse_segments())
    store.create_lease(Lease("ta", "n1", datetime.now(UTC) - timedelta(hours=1), networks=("ta-net",)))
    store.set_node_state("n1", NodeState.LEASED)
    ledger = MoveLedger(store)
    queued = ledger.request("n1", MoveRequest("tb", networks=("tb-net",)))
    failed = ledger.request("n2", MoveRequest("tb", networks=("tb-net",)))
    running = ledger.request("n3", MoveRequest("tb", networks=("tb-net",)))
    claimed = {m.node: m for m in ledger.claim("elsewhere:1", 10)}
    ledger.fail(claimed["n2"], "switch leaf1 did not answer")
    ledger.retry(failed.id or 0)  # pending again: it had started, its ports are in quarantine
    ledger.claim("elsewhere:1", 10)
    ledger.fail(ledger.get(failed.id or 0), "switch leaf1 did not answer")
    ledger.requeue([claimed["n1"]], "test")  # n1 back to pending, but its first claim counts: started
    store.close()

    p = _gf(tmp_path, "move", "cancel", str(running.id))
    assert p.returncode == 2
    line = p.stderr.strip()
    assert "\n" not in line and f"move {running.id} is running (at quarantine)" in line and "pending or failed" in line
    err = json.loads(_gf(tmp_path, "move", "cancel", str(running.id), "--json").stdout)
    assert {k: err["error"][k] for k in ("code", "field", "value", "allowed")} == {  # the API's error shape
        "code": "conflict", "field": "status", "value": "running", "allowed": "pending, failed"}  # fmt: skip

    p = _gf(tmp_path, "move", "cancel", str(failed.id), "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert (out["id"], out["node"], out["status"]) == (failed.id, "n2", "cancelled")
    assert out["message"].startswith("cancelled by admin:") and "node n2 returns to quarantine" in out["message"]

    p = _gf(tmp_path, "move", "cancel", str(queued.id))
    assert p.returncode == 0, p.stderr
    assert f"move {queued.id}: n1 ta -> tb: cancelled" in p.stdout and "returns to quarantine" in p.stdout
    listed = json.loads(_gf(tmp_path, "move", "list", "--json").stdout)
    assert {m["node"]: m["status"] for m in listed} == {"n1": "cancelled", "n2": "cancelled", "n3": "running"}
    events = json.loads(_gf(tmp_path, "events", "--json").stdout)
    items = events["items"] if isinstance(events, dict) else events
    assert [(e["action"], e["outcome"]) for e in items[:4]] == [("move.cancel", "ok"), ("move.cancel", "ok"),
                                                                ("move.cancel", "error"), ("move.cancel", "error")]  # fmt: skip

    p = _gf(tmp_path, "move", "cancel", "0")
    assert p.returncode == 2 and "\n" not in p.stderr.strip()
    p = _gf(tmp_path, "move", "cancel", "999")
    assert p.returncode == 2 and "move not found: 999" in p.stderr
