"""`gpufabric lease offers|accept|decline` on a store (no fabrics needed: an offer changes none)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from typer.testing import CliRunner

from gpufabric.cli.main import app
from gpufabric.domain.auth import LOCAL_ADMIN, Principal, Role
from gpufabric.domain.errors import ConflictError
from gpufabric.store.core import Store
from gpufabric.store.registry import parse_segments
from gpufabric.workflow.actions import Actions
from gpufabric.workflow.inventory import inventory_from_dict

from support.api_world import inventory


def test_offers_are_listed_accepted_and_declined_from_the_cli(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path}/gpufabric.db")
    act = Actions(store, parse_segments)
    act.import_inventory(LOCAL_ADMIN, inventory_from_dict(inventory(2)))
    for t in ("alpha", "beta"):
        act.create_tenant(LOCAL_ADMIN, t)
    for n in ("gpu-0000", "gpu-0001"):
        act.set_owner(LOCAL_ADMIN, n, "alpha")
    owner = Principal("alpha-owner", Role.OWNER, "alpha")
    first = act.create_lease(owner, "beta", "gpu-0000", None)
    second = act.create_lease(owner, "beta", "gpu-0001", None)
    store.close()
    env = {**os.environ, "GPUFABRIC_HOME": str(tmp_path)}
    run = lambda *a: CliRunner().invoke(app, list(a), env=env)  # noqa: E731

    listed = run("lease", "offers", "--json")
    assert listed.exit_code == 0, listed.output
    assert sorted((m["id"], m["node"], m["to_tenant"]) for m in json.loads(listed.output)) == [
        (first.id, "gpu-0000", "beta"), (second.id, "gpu-0001", "beta")
    ]
    ok = run("lease", "accept", str(first.id), "--json")
    assert ok.exit_code == 0 and json.loads(ok.output)["status"] == "pending", ok.output
    no = run("lease", "decline", str(second.id))
    assert no.exit_code == 0 and no.output.strip() == f"offer {second.id} (gpu-0001 -> beta): cancelled"
    again = run("lease", "accept", str(second.id))  # main() turns it into one line and exit 2
    assert isinstance(again.exception, ConflictError)
    assert again.exception.message == f"move {second.id} is cancelled, not an open offer"
    assert json.loads(run("lease", "offers", "--json").output) == []
