"""The CLI through a running ``gpufabric serve`` (``--api`` + token) on the lab: the same
``--json`` as acting directly, a move run by the server's worker (verified on OVS and by SMP),
the event log of API writes; and the API without a token or with another tenant's token."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gpufabric.lab.serve import serving

from e2e.conftest import LabEnv, owner_of_ports
from e2e.test_move import nets_of

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def server(lab: LabEnv) -> Iterator[dict[str, Any]]:
    admin = lab.gfj("token", "create", "--role", "admin", "--name", "cli")["secret"]
    beta = lab.gfj("token", "create", "--role", "lessee", "--tenant", "beta")["secret"]
    with serving(lab.env, "--interval", "0", "--window", "0.1", "--worker-poll", "0.5") as srv:
        yield {"base": srv.base, "admin": admin, "beta": beta}


def api(server: dict[str, Any], who: str = "admin") -> dict[str, str]:
    return {"GPUFABRIC_API": server["base"], "GPUFABRIC_TOKEN": server[who]}


def test_cli_prints_the_same_json_through_the_api(lab: LabEnv, server: dict[str, Any]) -> None:
    for cmd in (("node", "list"), ("tenant", "list"), ("network", "list"), ("offering", "list"), ("lease", "list")):
        assert lab.gfj(*cmd, extra_env=api(server)) == lab.gfj(*cmd), cmd


def test_move_through_the_api_is_run_by_the_server_worker(lab: LabEnv, server: dict[str, Any]) -> None:
    env = api(server)
    lab.gf("tenant", "create", "gamma", extra_env=env)
    lab.gf("network", "create", "gamma-net", "--tenant", "gamma", extra_env=env)
    nets = nets_of(lab)
    done = lab.gfj("node", "move", "gpu-a02", "--to-tenant", "gamma", extra_env=env, timeout=120)["moves"][0]
    assert done["status"] == "done" and done["phase"] == "done", done
    assert {"quarantine", "join"} <= set(done["timings"]) and done["events"]
    assert owner_of_ports(lab, "gpu-a02", nets) == {"gamma"}
    events = lab.gfj("events", "--limit", "5", extra_env=env)
    assert [e["action"] for e in events[:3]] == ["move.create", "network.create", "tenant.create"]
    assert {e["actor"] for e in events[:3]} == {"cli"}
    shown = lab.gfj("move", "show", str(done["id"]), extra_env=env)
    assert shown["status"] == "done"


def test_a_move_and_an_error_print_one_shape_locally_and_through_the_api(lab: LabEnv, server: dict[str, Any]) -> None:
    """``node move --json`` is the same document whoever ran the move (this process or the
    server's worker), and so is an error (the API's own error shape)."""
    env = api(server)
    here = lab.gfj("node", "move", "gpu-a01", "--to-tenant", "beta", "--network", "beta-net", timeout=120)
    there = lab.gfj("node", "move", "gpu-a01", "--to-tenant", "quarantine", extra_env=env, timeout=120)
    assert set(here) == set(there) == {"moves", "phases", "total_seconds", "plans"}
    assert set(here["moves"][0]) == set(there["moves"][0]) == set(lab.gfj("move", "show", str(here["moves"][0]["id"])))
    assert {k for p in here["phases"] for k in p} == {k for p in there["phases"] for k in p}
    for run in (here, there):  # this process ran the first (or followed the server's worker), the server the second
        assert {"quarantine", "join"} <= {p["phase"] for p in run["phases"]} and run["total_seconds"] > 0, run
    assert (here["moves"][0]["to_tenant"], there["moves"][0]["to_tenant"]) == ("beta", "quarantine")
    assert all(m["status"] == "done" for m in (here["moves"][0], there["moves"][0]))
    for cmd in (("node", "show", "gpu-zz9"), ("move", "show", "99999"), ("tenant", "create", "beta")):
        mine = lab.gf(*cmd, "--json", check=False)
        theirs = lab.gf(*cmd, "--json", extra_env=env, check=False)
        assert mine.returncode == theirs.returncode == 2, cmd
        a, b = json.loads(mine.stdout), json.loads(theirs.stdout)
        assert set(a["error"]) == set(b["error"]) == {"code", "field", "value", "allowed", "message"}, (a, b)
        assert a["error"]["code"] == b["error"]["code"] and a["error"]["message"] == b["error"]["message"], (a, b)


def test_a_lease_dry_run_through_the_api_is_the_local_one(lab: LabEnv, server: dict[str, Any]) -> None:
    """Its offering and GPU count reach the preview (once refused: "Extra inputs are not permitted")."""
    args = ("lease", "create", "--tenant", "beta", "--node", "gpu-a04", "--offering", "openstack", "--dry-run")
    assert lab.gfj(*args, extra_env=api(server)) == lab.gfj(*args)


def test_api_without_a_token_or_with_another_tenants_token(lab: LabEnv, server: dict[str, Any]) -> None:
    base = server["base"] + "/api/v1"
    for path in ("/nodes", "/nodes/gpu-a02", "/leases", "/events"):
        r = httpx.get(base + path, timeout=5)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", path
    beta = {"Authorization": f"Bearer {server['beta']}"}
    assert httpx.get(base + "/nodes/gpu-a02", headers=beta, timeout=5).status_code == 404  # gamma's node
    assert httpx.get(base + "/networks/gamma/gamma-net", headers=beta, timeout=5).status_code == 404
    r = httpx.post(base + "/moves", json={"node": "gpu-a02", "to_tenant": "beta"}, headers=beta, timeout=5)
    assert r.status_code == 404
    r = httpx.delete(base + "/nodes/gpu-a02/attachments/gamma-net", headers=beta, timeout=5)
    assert r.status_code == 404
    p = lab.gf("node", "show", "gpu-a02", extra_env=api(server, "beta"), check=False)
    assert p.returncode == 2 and "not found" in p.stderr
    nets = nets_of(lab)
    assert owner_of_ports(lab, "gpu-a02", nets) == {"gamma"}, "nothing changed"


def _wait_owner(lab: LabEnv, node: str, want: set[str], timeout: float = 30) -> set[str]:
    nets = nets_of(lab)
    deadline = time.monotonic() + timeout
    while True:
        got = owner_of_ports(lab, node, nets)
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def test_lease_through_the_api_is_applied_by_the_server(lab: LabEnv, server: dict[str, Any]) -> None:
    env = api(server)
    made = lab.gfj("lease", "create", "--tenant", "beta", "--node", "gpu-a03", "--network", "beta-net", extra_env=env)
    made = made["moves"][0]
    # the grant is a move the server's worker runs; the CLI followed it to its end
    assert (made["to_tenant"], made["status"]) == ("beta", "done") and made["timings"]
    assert _wait_owner(lab, "gpu-a03", {"beta"}) == {"beta"}
    lease = next(x for x in lab.gfj("lease", "list", extra_env=env) if x["node"] == "gpu-a03" and x["active"])
    ended = lab.gfj("lease", "delete", str(lease["id"]), extra_env=env)["moves"][0]
    assert (ended["to_tenant"], ended["status"]) == ("quarantine", "done")
    assert _wait_owner(lab, "gpu-a03", {"quarantine"}) == {"quarantine"}
    gone = next(x for x in lab.gfj("lease", "list", extra_env=env) if x["id"] == lease["id"])
    assert gone["end"] is not None and not gone["active"]
    owner = lab.gfj("node", "owner", "gpu-a04", "--tenant", "beta", extra_env=env)
    assert owner["owner"] == "beta"


def test_node_attachments_for_integrations(lab: LabEnv, server: dict[str, Any]) -> None:
    """What the Neutron integration calls: attach a node to a tenant's network (a move through
    quarantine), look it up by switch port, then detach (back to quarantine)."""
    base, auth = server["base"] + "/api/v1", {"Authorization": f"Bearer {server['admin']}"}

    def wait_move(move_id: int) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while True:
            m: dict[str, Any] = httpx.get(f"{base}/moves/{move_id}", headers=auth, timeout=5).json()
            if m["status"] in ("done", "failed") or time.monotonic() > deadline:
                return m
            time.sleep(0.3)

    r = httpx.post(f"{base}/nodes/gpu-a04/attachments", json={"network": "beta-net", "tenant": "beta"},
                   headers=auth, timeout=10)
    assert r.status_code == 202 and r.json()["move"]["to_tenant"] == "beta"
    assert wait_move(r.json()["move"]["id"])["status"] == "done"
    assert owner_of_ports(lab, "gpu-a04", nets_of(lab)) == {"beta"}
    node = httpx.get(f"{base}/nodes/gpu-a04", headers=auth, timeout=5).json()
    eth = node["ports"]["ethernet"][0]
    found = httpx.get(f"{base}/ports/lookup", params={"switch": eth["switch"], "port": eth["switch_port"]},
                      headers=auth, timeout=5)
    assert found.json() == {"node": "gpu-a04"}
    r = httpx.delete(f"{base}/nodes/gpu-a04/attachments/beta-net", headers=auth, timeout=10)
    assert r.status_code == 202 and r.json()["move"]["to_tenant"] == "quarantine"
    assert wait_move(r.json()["move"]["id"])["status"] == "done"
    assert owner_of_ports(lab, "gpu-a04", nets_of(lab)) == {"quarantine"}
