"""A bonded node on the real lab: gpu-a04's eth0+eth1 are one LACP bond on leaf01 (the leaf's
OVS bond Port ``<prefix>n004b``; the host side is gpu-a04's own OVS bridge in its namespace).

Moves set the VLAN on the bond Port, never on its members; pings through the bond follow
tenancy; a member cut just before or during a move leaves the bond in exactly one of old tenant
/ quarantine / new tenant, the move completes and the node stays reachable over the other
member; the audit is clean on the healthy lab and reports ETH-BOND-MEMBER-VLAN when a member is
pulled out of the bond with a VLAN of its own behind gpufabric's back.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from e2e.conftest import GF, LabEnv, owner_of_ports
from e2e.test_move import nets_of

pytestmark = pytest.mark.root

LAB_NODES = 4
LAB_BONDED = "gpu-a04"
BONDED = "gpu-a04"
QUARANTINE = 4000


def _wait(what: str, ok: Callable[[], bool], timeout: float = 30.0) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if ok():
            return time.monotonic() - t0
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout}s")


class Bond:
    def __init__(self, lab: LabEnv) -> None:
        self.lab = lab
        eth = lab.node(BONDED)["ethernet"]
        self.name: str = eth[0]["bond"]
        self.members: list[str] = [e["ovs_port"] for e in eth]
        self.leaf: str = eth[0]["bridge"]
        self.sw_ns: str = lab.status["ovs_netns"]
        self.ctl = str(lab.home / "lab" / "ovs" / "ovs-vswitchd.ctl")

    def vsctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ovs-vsctl", f"--db=unix:{self.lab.status['ovsdb_socket']}", *args],
                              capture_output=True, text=True, timeout=30, check=check)  # fmt: skip

    def appctl(self, *args: str) -> str:
        return subprocess.run(["ip", "netns", "exec", self.sw_ns, "ovs-appctl", "-t", self.ctl, *args],
                              capture_output=True, text=True, timeout=30, check=True).stdout  # fmt: skip

    def interfaces(self) -> set[str]:
        """The member interfaces of the leaf's bond Port, read from OVSDB."""
        uuids = self.vsctl("get", "port", self.name, "interfaces").stdout.strip("[]\n ").split(", ")
        return {self.vsctl("get", "interface", u, "name").stdout.strip().strip('"') for u in uuids if u}

    def attached(self) -> int:
        return self.appctl("lacp/show", self.name).count("current attached")

    def link(self, member: str, state: str) -> None:
        subprocess.run(["ip", "-n", self.sw_ns, "link", "set", member, state], check=True, timeout=30)


@pytest.fixture(scope="module")
def bond(lab: LabEnv) -> Iterator[Bond]:
    b = Bond(lab)
    yield b
    for m in b.members:
        subprocess.run(["ip", "-n", b.sw_ns, "link", "set", m, "up"], check=False, timeout=30)


def _audit(lab: LabEnv) -> list[dict[str, Any]]:
    import json

    out = lab.gf("audit", "--json", check=False)
    violations: list[dict[str, Any]] = json.loads(out.stdout)["violations"]
    return violations


def test_the_lab_has_a_bonded_node_born_quarantined(lab: LabEnv, bond: Bond) -> None:
    eth = lab.node(BONDED)["ethernet"]
    assert [(e["nic"], e["bond"], e["bond_mode"]) for e in eth] == [
        ("eth0", bond.name, "lacp"), ("eth1", bond.name, "lacp")]  # fmt: skip
    assert all(e["bond"] == "" for n in ("gpu-a01", "gpu-a02", "gpu-a03") for e in lab.node(n)["ethernet"])
    inv = lab.gfj("node", "show", BONDED)["fabrics"]["ethernet"]["ports"]
    assert [(p["name"], p["switch_port"], p["bond"], p["bond_mode"]) for p in inv] == [
        ("eth0", bond.members[0], bond.name, "lacp"), ("eth1", bond.members[1], bond.name, "lacp")]  # fmt: skip
    assert bond.interfaces() == set(bond.members)
    assert lab.ovs_tag(bond.name) == QUARANTINE
    assert bond.vsctl("get", "port", bond.name, "protected").stdout.strip() == "true"
    for m in bond.members:  # the members are interfaces of the bond, not Ports of their own
        assert bond.vsctl("get", "port", m, "tag", check=False).returncode != 0
    secs = _wait("LACP negotiated with both members attached", lambda: bond.attached() == 2)
    print(f"LACP negotiated {secs:.1f}s after the test started")
    assert "status: active negotiated" in bond.appctl("lacp/show", bond.name)
    assert not lab.ping(BONDED, "gpu-a01")  # quarantined


def test_a_move_sets_the_bond_and_pings_through_it_follow_tenancy(lab: LabEnv, bond: Bond) -> None:
    nets = nets_of(lab)
    for nodes, tenant in ((("gpu-a01", BONDED), "alpha"), (("gpu-a02",), "beta")):
        moved = lab.gfj("node", "move", *nodes, "--to-tenant", tenant)["moves"]
        assert sorted((m["node"], m["status"]) for m in moved) == [(n, "done") for n in sorted(nodes)]
    assert lab.ovs_tag(bond.name) == nets["alpha"][0]
    assert bond.interfaces() == set(bond.members)
    assert owner_of_ports(lab, BONDED, nets) == {"alpha"}
    _wait("gpu-a04 -> gpu-a01 (alpha) through the bond", lambda: lab.ping(BONDED, "gpu-a01"))
    assert lab.ping("gpu-a01", BONDED)
    assert not lab.ping(BONDED, "gpu-a02")  # beta
    assert not lab.ping(BONDED, "gpu-a03")  # quarantine
    assert _audit(lab) == []  # no ETH-BOND-* finding (nor any other) on the healthy lab


def test_a_member_cut_just_before_a_move(lab: LabEnv, bond: Bond) -> None:
    nets = nets_of(lab)
    bond.link(bond.members[0], "down")
    try:
        _wait("the cut member leaves the bond", lambda: bond.attached() == 1)
        moved = lab.gfj("node", "move", BONDED, "--to-tenant", "beta")
        assert moved["moves"][0]["status"] == "done"
        assert lab.ovs_tag(bond.name) == nets["beta"][0]
        assert owner_of_ports(lab, BONDED, nets) == {"beta"}
        line = bond.appctl("bond/show", bond.name).split(f"member {bond.members[0]}", 1)[1].split("\n", 1)[0]
        assert "disabled" in line
        secs = _wait("gpu-a04 -> gpu-a02 (beta) over the remaining member", lambda: lab.ping(BONDED, "gpu-a02"))
        print(f"beta reachable over {bond.members[1]} alone {secs:.1f}s after the move")
        assert not lab.ping(BONDED, "gpu-a01")
    finally:
        bond.link(bond.members[0], "up")
    _wait("both members attached again", lambda: bond.attached() == 2)


def test_a_member_cut_during_a_move_leaves_the_bond_in_exactly_one_tenant(lab: LabEnv, bond: Bond) -> None:
    nets = nets_of(lab)
    allowed = {nets["beta"][0]: "beta", QUARANTINE: "quarantine", nets["alpha"][0]: "alpha"}
    mid = subprocess.Popen([GF, "node", "move", BONDED, "--to-tenant", "alpha", "--json"], env=lab.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    seen: list[str] = []
    cut = False
    try:
        while mid.poll() is None:
            tag = lab.ovs_tag(bond.name)
            assert tag in allowed, f"bond {bond.name} in VLAN {tag}, not beta / quarantine / alpha"
            seen.append(allowed[tag])
            assert bond.interfaces() == set(bond.members)  # never split: one Port, one VLAN
            if not cut:
                bond.link(bond.members[1], "down")
                cut = True
            time.sleep(0.1)
        _out, err = mid.communicate(timeout=60)
        assert mid.returncode == 0, err
        assert cut, "the move ended before the member could be cut"
        print(f"bond owners seen during the move: {list(dict.fromkeys(seen))}")
        assert lab.ovs_tag(bond.name) == nets["alpha"][0]
        assert owner_of_ports(lab, BONDED, nets) == {"alpha"}
        _wait("gpu-a04 -> gpu-a01 (alpha) over the remaining member", lambda: lab.ping(BONDED, "gpu-a01"))
        assert not lab.ping(BONDED, "gpu-a02")
    finally:
        bond.link(bond.members[1], "up")
    _wait("both members attached again", lambda: bond.attached() == 2)
    assert lab.ping(BONDED, "gpu-a01")


def test_audit_reports_a_member_given_a_vlan_of_its_own(lab: LabEnv, bond: Bond) -> None:
    member = bond.members[1]
    own = nets_of(lab)["beta"][0]
    uuid = bond.vsctl("get", "interface", member, "_uuid").stdout.strip()
    bond.vsctl("remove", "port", bond.name, "interfaces", uuid)  # behind gpufabric's back
    bond.vsctl("add-port", bond.leaf, member, "--", "set", "port", member, f"tag={own}", "vlan_mode=access")
    try:
        found = [v for v in _audit(lab) if v["invariant"] == "ETH-BOND-MEMBER-VLAN"]
        assert [(v["node"], v["device"], v["port"], v["resource"], v["severity"]) for v in found] == [
            (BONDED, bond.leaf, member, f"bond:{bond.name}", "critical")]  # fmt: skip
        assert f"carries VLANs {own}" in found[0]["message"]
    finally:
        bond.vsctl("del-port", member)
        bond.vsctl("--", "--id=@i", "create", "interface", f"name={member}", "--",
                   "add", "port", bond.name, "interfaces", "@i")  # fmt: skip
    assert bond.interfaces() == set(bond.members)
    assert [v for v in _audit(lab) if v["invariant"].startswith("ETH-BOND-")] == []


def test_bonding_a_node_the_lab_has_not_is_refused_before_anything_starts(tmp_path: Any) -> None:
    import os

    env = {**os.environ, "GPUFABRIC_HOME": str(tmp_path), "GPUFABRIC_DB": ""}
    p = subprocess.run([GF, "lab", "up", "--nodes", "2", "--bonded", "gpu-a01,gpu-a07"], env=env,
                       capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert p.returncode == 2, p.stdout + p.stderr
    assert (p.stdout + p.stderr).strip().splitlines()[-1] == (
        "error: invalid bonded: 'gpu-a07'; allowed: nodes of the lab (gpu-a01..gpu-a02)")  # fmt: skip
    assert not (tmp_path / "lab").exists()
