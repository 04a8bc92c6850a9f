"""The audit on the real lab: hand-made drift on every fabric is reported with the right
invariant id and the exact port/GUID (exit code non-zero), a rogue OpenSM is named with
its GUID and node, and after ``gpufabric reconcile --once`` (repair) the audit is clean."""

from __future__ import annotations

import time

import pytest

from gpufabric.lab.lab import Lab

from e2e.conftest import LabEnv
from e2e.test_move import nets_of

pytestmark = pytest.mark.root


def violations(lab: LabEnv) -> tuple[int, list[dict[str, object]]]:
    p = lab.gf("audit", "--json", check=False)
    return p.returncode, lab_json(p.stdout)["violations"]


def lab_json(text: str) -> dict[str, object]:
    import json

    return json.loads(text)  # type: ignore[no-any-return]


def has(vs: list[dict[str, object]], invariant: str, port: str, node: str) -> bool:
    return any(v["invariant"] == invariant and v["port"] == port and v["node"] == node for v in vs)


def test_drift_on_every_fabric_is_reported_then_repaired(lab: LabEnv) -> None:
    nets = nets_of(lab)
    lab.gfj("node", "move", "gpu-a01", "--to-tenant", "alpha")
    lab.gfj("node", "move", "gpu-a03", "--to-tenant", "beta")
    code, vs = violations(lab)
    assert (code, vs) == (0, [])

    # 1. Ethernet: gpu-a01's port put by hand on beta's VLAN
    port = lab.eth_ports("gpu-a01")[0]
    lab.ovs_set_tag(port, nets["beta"][0])
    # 2. InfiniBand: beta's gpu-a03 GUID added by hand to alpha's partition, then HUP
    fab = Lab(lab.home).ib_fabric()
    guid = lab.guids("gpu-a03")[0]
    text = fab.partitions_conf.read_text()
    head = next(line for line in text.splitlines() if line.startswith(f"pk_{nets['alpha'][1] & 0x7fff:04x}="))
    fab.write_partitions(text.replace(head + "\n", f"{head}\n{guid}=full,\n"))
    fab.wait_subnet_up(fab.hup())
    code, vs = violations(lab)
    assert code == 1
    assert has(vs, "X-DRIFT", port, "gpu-a01") and has(vs, "X-NODE-SPLIT", port, "gpu-a01")
    assert has(vs, "IB-GUID-FOREIGN-PKEY", guid, "gpu-a03") and has(vs, "IB-PKEY-SHARED", guid, "gpu-a03")
    report = lab.home / "audit.html"
    human = lab.gf("audit", "--html", str(report), check=False)
    assert human.returncode == 1 and "violation(s) of 15 invariant(s)" in human.stdout
    html = report.read_text()
    assert html.startswith("<!DOCTYPE html>") and guid in html and port in html and "<script" not in html

    # 3. a rogue OpenSM on a node a tenant had (gpu-a04, now in quarantine, still with root)
    rogue_node = "gpu-a04"
    rogue_guid = lab.guids(rogue_node)[0]
    lab.gfj("lab", "rogue-sm", "--node", rogue_node)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        code, vs = violations(lab)
        if has(vs, "IB-ROGUE-SM", rogue_guid, rogue_node):
            break
        time.sleep(1)
    assert has(vs, "IB-ROGUE-SM", rogue_guid, rogue_node), vs
    assert code == 1

    fixed = lab.gfj("reconcile", "--once", "--policy", "repair")
    assert fixed["repaired"] is True
    assert rogue_guid in " ".join(fixed["rogue_sms"]) and fixed["rogue_contained"] == [rogue_guid]
    code, vs = violations(lab)
    assert (code, vs) == (0, []), vs
    assert lab.ovs_tag(port) == nets["alpha"][0]
    tables = lab.pkey_tables()
    assert {e & 0x7FFF for e in tables[guid] if e & 0x8000} == {nets["beta"][1]}
    assert rogue_guid not in tables  # its switch port is disabled: cut off the fabric
