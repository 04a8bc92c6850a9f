"""One JSON shape whoever answers (issue 19): the installed ``gpufabric`` on the store and the
same command through a real uvicorn over that store print the same document for ``move list``
(and ``--open``: pending, running, failed or offered, never a cancelled move), ``lease decline``
and ``lease delete`` of a lease that never started. These printed the domain's dataclasses
locally and the API's rows remotely, and ``--open`` counted cancelled moves remotely."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gpufabric.domain.auth import LOCAL_ADMIN, Principal, Role
from gpufabric.domain.models import Lease
from gpufabric.workflow.actions import Actions

from support.api_world import build_world
from support.live_api import gf, live_api


def _json(p: Any) -> Any:
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout)


def _same_shape(a: dict[str, Any], b: dict[str, Any], differ: set[str]) -> None:
    assert set(a) == set(b)
    assert {k: v for k, v in a.items() if k not in differ} == {k: v for k, v in b.items() if k not in differ}


def test_local_and_remote_print_one_shape(tmp_path: Path) -> None:
    w = build_world(tmp_path, nodes=8, leased=2)
    act = Actions(w.store, w.ctx.segment_config)
    owner = Principal("alpha-owner", Role.OWNER, "alpha")
    for node in ("gpu-0005", "gpu-0006"):
        act.set_owner(LOCAL_ADMIN, node, "alpha")
    offers = [act.create_lease(owner, "beta", n, None).id for n in ("gpu-0005", "gpu-0006")]  # offers into beta
    act.request_move(LOCAL_ADMIN, "gpu-0002", "beta", None)  # pending: no worker runs here
    cancelled = act.request_move(LOCAL_ADMIN, "gpu-0003", "alpha", None)
    act.cancel_move(LOCAL_ADMIN, cancelled.id or 0)
    later = datetime.now(UTC) + timedelta(days=1)
    future = [w.store.create_lease(Lease("alpha", n, later, None, ("alpha-net",))).id for n in ("gpu-0004", "gpu-0007")]
    remote_home = tmp_path / "remote"
    remote_home.mkdir()
    with live_api(w.ctx) as base:
        def remote(*args: str) -> Any:
            return _json(gf(remote_home, "--api", base, *args, "--json", GPUFABRIC_TOKEN=w.tokens["admin"]))

        def local(*args: str) -> Any:
            return _json(gf(tmp_path, *args, "--json"))

        moves = local("move", "list")
        assert moves == remote("move", "list") and len(moves) == 4
        assert [m["id"] for m in moves] == sorted((m["id"] for m in moves), reverse=True)  # newest first, both
        opened = local("move", "list", "--open")
        assert opened == remote("move", "list", "--open")
        assert sorted(m["status"] for m in opened) == ["offered", "offered", "pending"]  # not the cancelled one
        here, there = local("lease", "decline", str(offers[0])), remote("lease", "decline", str(offers[1]))
        _same_shape(here, there, {"id", "node"})
        assert here["status"] == "cancelled" and here["created_at"] is None  # the API's MoveOut, from the workflow
        here, there = local("lease", "delete", str(future[0])), remote("lease", "delete", str(future[1]))
        _same_shape(here, there, {"lease"})
        _same_shape(here["lease"], there["lease"], {"id", "node"})
        assert here["lease"]["active"] is False and here["moves"] == []


def test_a_dry_run_prints_the_same_plans_here_and_through_the_api_with_every_term(tmp_path: Path) -> None:
    """``node move --dry-run`` through ``--api`` printed the API's plan objects as Python dicts
    and left out ``--offering`` and ``--gpus``; now both paths print each phase's plan lines."""
    from gpufabric.engine.fabrics import Fabrics
    from gpufabric.engine.moves import MoveEngine
    from gpufabric.store.registry import parse_segments

    w = build_world(tmp_path, nodes=2, leased=0)
    w.ctx.engine = lambda: MoveEngine(w.store, Fabrics(), parse_segments())  # no devices: empty plans
    remote_home = tmp_path / "remote"
    remote_home.mkdir()
    (tmp_path / "fabrics.yaml").write_text("{}\n")  # here too: no fabric configured
    move = ("node", "move", "gpu-0000", "--to-tenant", "alpha", "--offering", "openstack", "--dry-run")
    with live_api(w.ctx) as base:
        token = {"GPUFABRIC_TOKEN": w.tokens["admin"]}
        there, here = gf(remote_home, "--api", base, *move, **token), gf(tmp_path, *move)
        assert there.returncode == here.returncode == 0, there.stderr + here.stderr
        assert there.stdout == here.stdout and "{" not in there.stdout
        assert [line for line in there.stdout.splitlines() if line] == ["quarantine", "no changes", "join", "no changes"]
        assert _json(gf(remote_home, "--api", base, *move, "--json", **token)) == _json(gf(tmp_path, *move, "--json"))
        bad = gf(remote_home, "--api", base, *move, "--gpus", "99", **token)  # sent now: the server refuses it
        assert bad.returncode == 2 and "gpus" in bad.stdout + bad.stderr, bad.stdout + bad.stderr
