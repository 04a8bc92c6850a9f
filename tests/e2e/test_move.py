"""A node moved between tenants and offerings on the real lab: VLANs and PKeys change,
verified by reading OVS and the PKey tables by SMP; per-phase timings are printed."""

from __future__ import annotations

import json

import pytest

from e2e.conftest import LabEnv, owner_of_ports

pytestmark = pytest.mark.root


def nets_of(lab: LabEnv) -> dict[str, tuple[int, int]]:
    out = {}
    for n in lab.gfj("network", "list"):
        seg = {s["fabric"]: s for s in n["segments"]}
        out[n["tenant"]] = (seg["ethernet"]["vlan"], int(seg["infiniband"]["pkey"], 16))
    return out


def test_move_from_openstack_tenant_to_openshift_tenant(lab: LabEnv) -> None:
    nets = nets_of(lab)
    first = lab.gfj("node", "move", "gpu-a01", "--to-tenant", "alpha", "--offering", "openstack")
    assert first["moves"][0]["status"] == "done"
    assert owner_of_ports(lab, "gpu-a01", nets) == {"alpha"}
    assert lab.ovs_tag(lab.eth_ports("gpu-a01")[0]) == nets["alpha"][0]

    dry = lab.gfj("node", "move", "gpu-a01", "--to-tenant", "beta", "--offering", "openshift", "--dry-run")
    assert [c["after"] for c in dry["quarantine"]["ethernet"]] == ["shutdown"]
    assert {(c["action"], c["pkey"]) for c in dry["quarantine"]["infiniband"]} == {
        ("remove", f"0x{nets['alpha'][1]:04x}")
    }
    assert {(c["action"], c["pkey"]) for c in dry["join"]["infiniband"]} == {("add", f"0x{nets['beta'][1]:04x}")}
    assert owner_of_ports(lab, "gpu-a01", nets) == {"alpha"}, "a dry run changes nothing"

    result = lab.gfj("node", "move", "gpu-a01", "--to-tenant", "beta", "--offering", "openshift")
    assert result["moves"][0]["status"] == "done" and result["moves"][0]["from_tenant"] == "alpha"
    assert [p["phase"] for p in result["phases"]] == ["quarantine", "swap", "join"]
    assert all(p["seconds"] > 0 for p in result["phases"])
    assert result["phases"][0]["changes"] >= 2 and result["phases"][2]["changes"] >= 2
    assert owner_of_ports(lab, "gpu-a01", nets) == {"beta"}
    node = lab.gfj("node", "show", "gpu-a01")
    assert node["offering"] == "openshift" and node["state"] == "leased"
    leases = [x for x in lab.gfj("lease", "list") if x["node"] == "gpu-a01"]
    assert [x["tenant"] for x in leases if x["end"] is None] == ["beta"]

    human = lab.gf("node", "move", "gpu-a01", "--to-tenant", "quarantine").stdout
    assert "per-phase timings" in human and "quarantine" in human
    assert owner_of_ports(lab, "gpu-a01", nets) == {"quarantine"}


def test_bad_input_changes_nothing(lab: LabEnv) -> None:
    before = lab.gfj("move", "list")
    p = lab.gf("node", "move", "gpu-a02", "--to-tenant", "nosuch", check=False)
    assert p.returncode == 2 and "tenant not found: nosuch" in p.stderr
    p = lab.gf("network", "create", "x", "--tenant", "Bad Name", check=False)
    assert p.returncode == 2 and "invalid network.tenant" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert lab.gfj("move", "list") == before


def test_serve_rest_openapi_and_metrics(lab: LabEnv) -> None:
    import socket
    import subprocess
    import time

    import httpx

    from e2e.conftest import GF

    token = lab.gfj("token", "create", "--role", "admin", "--name", "metrics-test")["secret"]
    refused = lab.gf("serve", "--host", "0.0.0.0", check=False)
    assert refused.returncode == 2 and "loopback" in refused.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [GF, "serve", "--port", str(port), "--interval", "0.5", "--policy", "report"],
        env=lab.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        metrics = ""
        sample = "\ngpufabric_audit_last_timestamp_seconds 1"  # set (a Unix time), not the initial 0.0
        while time.monotonic() < deadline and sample not in metrics:
            try:
                metrics = httpx.get(f"{base}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=2).text
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        assert sample in metrics
        assert 'gpufabric_audit_violations{invariant="IB-ROGUE-SM",severity="critical"} 0.0' in metrics
        assert "gpufabric_audit_duration_seconds" in metrics and "gpufabric_reconcile_drift 0.0" in metrics
        assert "gpufabric_loop_last_success_timestamp_seconds" in metrics
        spec = httpx.get(f"{base}/openapi.json", timeout=5).json()
        assert {"/api/v1/nodes", "/api/v1/tenants", "/api/v1/networks", "/api/v1/leases", "/api/v1/moves"} <= set(
            spec["paths"]
        )
        assert httpx.get(f"{base}/healthz", timeout=5).json()["status"] == "ok"
        assert httpx.get(f"{base}/metrics", timeout=5).status_code == 401  # issue 18: an admin token
        assert httpx.get(f"{base}/readyz", timeout=5).json()["checks"]["reconcile"] == "ok"  # no details
        ready = httpx.get(f"{base}/readyz", headers={"Authorization": f"Bearer {token}"}, timeout=5).json()
        assert ready["status"] == "ok" and ready["checks"]["reconcile"]["alive"]
        assert httpx.get(f"{base}/api/v1/nodes", timeout=5).status_code == 401  # no token, no answer
        auth = {"Authorization": f"Bearer {token}"}
        nodes = httpx.get(f"{base}/api/v1/nodes", headers=auth, timeout=5).json()["items"]
        assert {n["name"] for n in nodes} == {"gpu-a01", "gpu-a02", "gpu-a03", "gpu-a04"}
        missing = httpx.get(f"{base}/api/v1/nodes/nope", headers=auth, timeout=5)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        bad = httpx.post(f"{base}/api/v1/tenants", json={"name": "Bad Name"}, headers=auth, timeout=5)
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "name"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_lease_create_and_delete_apply_on_the_fabrics(lab: LabEnv) -> None:
    nets = nets_of(lab)
    dry = lab.gfj("lease", "create", "--tenant", "alpha", "--node", "gpu-a03", "--network", "alpha-net", "--dry-run")
    assert [c["after"] for c in dry["ethernet"]] == [f"access {nets['alpha'][0]}"]
    assert owner_of_ports(lab, "gpu-a03", nets) == {"quarantine"}, "a dry run changes nothing"
    created = lab.gfj("lease", "create", "--tenant", "alpha", "--node", "gpu-a03", "--network", "alpha-net")
    (grant,) = created["moves"]  # a lease is granted by a move from quarantine: join adds, nothing to remove
    assert (grant["from_tenant"], grant["to_tenant"], grant["status"]) == ("quarantine", "alpha", "done")
    assert {p["phase"]: p["changes"] for p in created["phases"]}["join"] >= 2
    assert owner_of_ports(lab, "gpu-a03", nets) == {"alpha"}
    lease = next(x for x in lab.gfj("lease", "list") if x["node"] == "gpu-a03" and x["end"] is None)
    gone = lab.gfj("lease", "delete", str(lease["id"]))
    (release,) = gone["moves"]  # ending it is a move to quarantine: the quarantine phase removes
    assert (release["from_tenant"], release["to_tenant"], release["status"]) == ("alpha", "quarantine", "done")
    assert {p["phase"]: p["changes"] for p in gone["phases"]}["quarantine"] >= 2
    assert owner_of_ports(lab, "gpu-a03", nets) == {"quarantine"}
    ended = next(x for x in lab.gfj("lease", "list") if x["id"] == lease["id"])
    assert ended["end"] is not None, "the lease is kept, ended (history; its id is never given again)"
    again = lab.gf("lease", "delete", str(lease["id"]), "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["moves"] == []


def test_several_nodes_in_one_command_are_one_request_and_one_batch(lab: LabEnv) -> None:
    nets = nets_of(lab)
    pair = ("gpu-a02", "gpu-a03")
    assert all(owner_of_ports(lab, n, nets) == {"quarantine"} for n in pair)
    before = lab.gfj("move", "list")
    p = lab.gf("node", "move", *pair, "nosuch", "--to-tenant", "beta", check=False)
    assert p.returncode == 2 and "node not found: nosuch" in p.stderr
    assert lab.gfj("move", "list") == before, "all or none: a refused request records no move"
    done = lab.gfj("node", "move", *pair, "--to-tenant", "beta")
    assert sorted((m["node"], m["from_tenant"], m["to_tenant"], m["status"]) for m in done["moves"]) == [
        ("gpu-a02", "quarantine", "beta", "done"), ("gpu-a03", "quarantine", "beta", "done")]  # fmt: skip
    assert {p["phase"]: p["changes"] for p in done["phases"]}["join"] >= 4  # both nodes' ports, one join
    assert all(owner_of_ports(lab, n, nets) == {"beta"} for n in pair)
    back = lab.gfj("node", "move", *pair, "--to-tenant", "quarantine")
    assert [m["status"] for m in back["moves"]] == ["done", "done"]
    assert all(owner_of_ports(lab, n, nets) == {"quarantine"} for n in pair)
