"""``gpufabric store backup`` while moves run, restore into a fresh home, then one reconcile pass
with the report policy over the same fabrics (issue 23): it must report exactly the nodes whose
fabric state changed after the backup (the moves that finished after it), and repair nothing.

A worker thread runs ROUNDS rounds; each round requests a move of every node (n1..n3, between
tenants ta and tb; three moves queued) and runs them one at a time (one running, the rest
queued), each device apply taking DEVICE_DELAY. The backup (the command, a separate process) is
started in the middle of the second move; the last round's moves are queued and wait
for it to return (so some moves always finish after it, however slow the backup). The expected drift is computed without
gpufabric: the devices' own state (the in-memory switch's ports, the SM's P_Key tables, the
tags) mapped to tenants through the networks, compared with the restored store's leases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufabric.domain.models import QUARANTINE
from gpufabric.domain.moves import MoveRequest, MoveStatus
from gpufabric.engine.fabrics import Fabrics
from gpufabric.engine.moves import MoveEngine
from gpufabric.engine.reconcile import Policy, reconcile_once
from gpufabric.fabrics.ethernet.entries import ethernet_ports
from gpufabric.fabrics.infiniband.entries import all_ib_ports
from gpufabric.store.core import Store
from gpufabric.store.moves import MoveLedger, prepared_ids

from support import drivers
from support.workers import memory_fabrics, observe, owner_map, seed
from unit.test_engine_memory import CFG, NODES, inventory

GF = str(Path(sys.executable).parent / "gpufabric")
ROUNDS = 5
DEVICE_DELAY = 0.08


@pytest.fixture
def fabrics() -> Iterator[Fabrics]:
    f = memory_fabrics(DEVICE_DELAY)
    yield f
    f.close()


def _devices_owner(f: Fabrics, store: Store) -> dict[str, str]:
    """node -> the one tenant (or quarantine) its ports hold, read from the devices themselves."""
    seen = owner_map(store)(observe(f))
    assert all(len(ts) == 1 for ts in seen.values()), seen  # no node split, no half-done move
    return {n: next(iter(ts)) for n, ts in seen.items()}


def _leased(store: Store) -> dict[str, str]:
    by_node = {x.node: x.tenant for x in store.leases()}
    return {n: by_node.get(n, QUARANTINE) for n in NODES}


def _drift_nodes(lines: list[str]) -> set[str]:
    """The nodes a drift plan's lines name (memory tags ``n1/m0``, switch ports, port GUIDs)."""
    inv = inventory()
    keys = {n.name: [f"{n.name}/m", *(f" {p.switch_port}" for p in ethernet_ports(n)), *(str(p.port_guid) for p in all_ib_ports(n))]
            for n in inv.nodes}  # fmt: skip
    out = {n for line in lines for n, ks in keys.items() if any(k in line for k in ks)}
    assert lines == [] or out, lines
    return out


def test_backup_while_moves_run_restore_then_reconcile_reports_exactly_the_later_moves(
    store_url: str,
    fresh_url: str,
    fabrics: Fabrics,
    tmp_path: Path,
) -> None:
    store = Store.open(store_url)
    seed(store, fabrics)
    eng = MoveEngine(store, fabrics, CFG, worker="worker:1", heartbeat_every=60)
    mid_move, backed_up, errors = threading.Event(), threading.Event(), []
    done_count = [0]

    def progress(phase: str, message: str) -> None:
        if done_count[0] >= 1 and phase == "join" and ": applying" in message:
            mid_move.set()

    eng.progress = progress

    def work() -> None:
        try:
            for r in range(ROUNDS):
                to = ("ta", "tb")[r % 2] if r else "ta"
                for i, n in enumerate(NODES):  # three queued; n2 alternates the other way
                    t = to if i != 1 else ("tb" if to == "ta" else "ta")
                    eng.ledger.request(n, MoveRequest(t, networks=(f"{t}-net",)))
                if r == ROUNDS - 1:  # the last round's moves are queued; they run once the backup returned
                    assert backed_up.wait(120)
                for _ in NODES:
                    b = eng.run_pending(limit=1)
                    assert b is not None and [m.status for m in b.moves] == [MoveStatus.DONE], b
                    done_count[0] += 1
        except BaseException as e:  # reported by the main thread
            errors.append(e)
            mid_move.set()

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    assert mid_move.wait(60) and not errors, errors
    env = {**os.environ, "GPUFABRIC_DB": store_url, "GPUFABRIC_HOME": str(tmp_path / "source-home")}
    before = done_count[0]
    p = subprocess.run([GF, "store", "backup", str(tmp_path / "s.bak"), "--json"], env=env, capture_output=True,
                       text=True, timeout=120, check=False)  # fmt: skip
    after = done_count[0]
    backed_up.set()
    assert p.returncode == 0, p.stderr
    worker.join(120)
    assert not worker.is_alive() and not errors, errors
    assert after < ROUNDS * len(NODES), "the moves were all done before the backup returned: no load"
    source_moves = MoveLedger(store).moves()
    assert len(source_moves) == ROUNDS * len(NODES) and all(m.status is MoveStatus.DONE for m in source_moves)

    fresh_env = {**os.environ, "GPUFABRIC_DB": fresh_url, "GPUFABRIC_HOME": str(tmp_path / "fresh-home")}
    r = subprocess.run([GF, "store", "restore", str(tmp_path / "s.bak"), "--json"], env=fresh_env,
                       capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["counts"] == json.loads(p.stdout)["counts"]

    restored = Store.open(fresh_url)
    try:
        moves_then = MoveLedger(restored).moves()
        done_then = [m for m in moves_then if m.status is MoveStatus.DONE]
        assert before <= len(done_then) <= after + 1, (before, len(done_then), after)  # as of one commit mid-load
        assert len(done_then) < (ROUNDS - 1) * len(NODES), "the backup was taken after the worker had stopped"
        assert [m.id for m in moves_then] == [m.id for m in source_moves[: len(moves_then)]]  # a prefix
        later = [m for m in source_moves if m.id not in {x.id for x in done_then}]
        assert later, "no move finished after the backup"

        now = _devices_owner(fabrics, store)  # the fabrics, read directly
        assert now == _leased(store)  # the source store and its fabrics agree
        then = _leased(restored)
        last_later = {m.node: m.to_tenant for m in later}  # each node's last move after the backup
        assert {n for n in NODES if now[n] != then[n]} == {n for n, t in last_later.items() if t != then[n]}
        # the restored store's desired owner: its lease's tenant, or quarantine while one of the
        # backup's open moves holds the node there (mid-move at the backup: the swap not committed)
        with restored.tx() as tx:  # (a move holds its node only once its before_move passed: "prepared")
            ready = prepared_ids(tx.session, [m.id for m in moves_then if m.id is not None])
        held = {m.node for m in moves_then if m.holds_node_in_quarantine(prepared=m.id in ready)}
        desired_then = {n: QUARANTINE if n in held else then[n] for n in NODES}
        expected = {n for n in NODES if now[n] != desired_then[n]}
        assert all(now[n] == t for n, t in last_later.items())

        applies = (drivers.switches(fabrics)["leaf1"].applies, drivers.sm(fabrics).applies, fabrics.backends["memory"].applies)
        eng2 = MoveEngine(restored, fabrics, CFG, worker="restored:1", heartbeat_every=60)
        res = reconcile_once(eng2, Policy.REPORT)
        lines = res.drift.lines()
        print(f"\nbackup after {before}-{after} of {len(source_moves)} moves; restored: {len(done_then)} done,"
              f" {len(moves_then) - len(done_then)} open; drift on {sorted(_drift_nodes(lines))}: {len(lines)} line(s)")  # fmt: skip
        assert _drift_nodes(lines) == expected
        assert not res.repaired and res.moves_resumed == 0
        assert (drivers.switches(fabrics)["leaf1"].applies, drivers.sm(fabrics).applies, fabrics.backends["memory"].applies) == applies
        assert _devices_owner(fabrics, store) == now  # the report changed nothing
    finally:
        restored.close()
        store.close()
