"""VM slots of a shared host on the lab's real OVS (issue 33, Ethernet only): ``lab up --vm-hosts
gpu-a01,gpu-a02`` gives both nodes a hypervisor OVS bridge ``hv-<node>`` (its uplink the node's
leaf-facing eth0) and one VM namespace per GPU on port ``vm<m>``. gpu-a01 and gpu-a02 are leased to
``infra`` in ``vm-host``; gpu-a01's slots A (GPUs 1-4, tenant a), B (5,7, b), C (6,8, c) and
gpu-a02's slot A2 (1-4, tenant a) are slot nodes (made through the store, as the slot-lease workflow
will) leased by the ordinary lease workflow (a node move from quarantine). Read back with
``ovs-vsctl`` on each hypervisor bridge and on the leaf, independently of gpufabric's drivers; pings
between VM namespaces. Then B's lease ends: only B's VM ports and the trunk's B VLAN change.
Needs root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufabric.domain.models import Inventory, Node
from gpufabric.domain.slots import slot_name
from gpufabric.fabrics.ethernet.drivers.ovsdb.driver import OvsdbSwitchDriver
from gpufabric.lab.netns import list_netns
from gpufabric.lab.vmhost import vm_ip, vm_netns
from gpufabric.store.core import Store

pytestmark = pytest.mark.root

GF = str(Path(sys.executable).parent / "gpufabric")
HOSTS = ("gpu-a01", "gpu-a02")
SLOTS = {
    "a": ("gpu-a01", (1, 2, 3, 4)),
    "b": ("gpu-a01", (5, 7)),  # pairs of the HGX board's partition table
    "c": ("gpu-a01", (6, 8)),
    "a2": ("gpu-a02", (1, 2, 3, 4)),
}
TENANT = {"a": "a", "b": "b", "c": "c", "a2": "a"}
QV = 4000


@dataclass
class VmLab:
    home: Path
    status: dict[str, Any]

    def gf(self, *args: str) -> str:
        p = subprocess.run([GF, *args], env={**os.environ, "GPUFABRIC_HOME": str(self.home), "GPUFABRIC_DB": ""},
                           capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
        assert p.returncode == 0, f"gpufabric {' '.join(args)} exited {p.returncode}: {p.stdout}\n{p.stderr}"
        return p.stdout

    def gfj(self, *args: str) -> Any:
        return json.loads(self.gf(*args, "--json"))

    def vsctl(self, db: Path, *args: str) -> str:
        return subprocess.run(["ovs-vsctl", f"--db=unix:{db}", *args], capture_output=True, text=True,
                              check=True).stdout.strip()  # fmt: skip

    def vm_tags(self, host: str) -> dict[str, int | None]:
        """Every VM port's tag on ``host``'s hypervisor bridge, read by ovs-vsctl."""
        db = self.home / "lab" / "vmhosts" / host / "db.sock"
        out = self.vsctl(db, "--format=json", "--columns=name,tag", "list", "port")
        rows = json.loads(out)["data"]
        return {name: (tag if isinstance(tag, int) else None) for name, tag in rows if name.startswith("vm")}

    def leaf_port(self, host: str) -> str:
        node = next(n for n in self.status["nodes"] if n["name"] == host)
        return str(node["ethernet"][0]["ovs_port"])

    def trunk(self, host: str) -> set[int]:
        """The VLANs the leaf's port to ``host`` allows, read by ovs-vsctl (its mode must be trunk)."""
        db = Path(self.status["ovsdb_socket"])
        port = self.leaf_port(host)
        assert self.vsctl(db, "get", "port", port, "vlan_mode") == "trunk"
        raw = self.vsctl(db, "get", "port", port, "trunks").strip("[]")
        return {int(v) for v in raw.split(",") if v.strip()}

    def ping(self, src: tuple[str, int], dst: tuple[str, int]) -> bool:
        prefix = self.status["prefix"]
        ip = vm_ip(HOSTS.index(dst[0]) + 1, dst[1]).split("/")[0]
        r = subprocess.run(["ip", "netns", "exec", vm_netns(prefix, *src), "ping", "-c", "2", "-i", "0.2", "-W", "1", ip],
                           capture_output=True)  # fmt: skip
        return r.returncode == 0


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VmLab]:
    home = tmp_path_factory.mktemp("gfvm")
    env = VmLab(home, {})
    env.status = env.gfj("lab", "up", "--nodes", "3", "--hcas-per-node", "1", "--vm-hosts", ",".join(HOSTS))
    try:
        yield env
    finally:
        prefix = env.status.get("prefix", "")
        subprocess.run([GF, "lab", "down"], env={**os.environ, "GPUFABRIC_HOME": str(home), "GPUFABRIC_DB": ""},
                       capture_output=True, timeout=120, check=False)  # fmt: skip
        assert not {n for n in list_netns() if prefix and n.startswith(prefix)}, "lab down left namespaces"


@pytest.fixture(scope="module")
def vlans(lab: VmLab) -> dict[str, int]:
    """The three tenants with a slot each on gpu-a01 (and a on gpu-a02), their VLANs."""
    for t in ("infra", "a", "b", "c"):
        lab.gf("tenant", "create", t)
    for t in ("a", "b", "c"):
        lab.gf("network", "create", f"{t}-net", "--tenant", t)
    for h in HOSTS:
        lab.gf("lease", "create", "--tenant", "infra", "--node", h, "--offering", "vm-host", "--no-networks")
    store = Store.open(home=lab.home)
    try:
        store.upsert_inventory(
            Inventory(tuple(Node(slot_name(h, m), host=h, slot_modules=m) for h, m in SLOTS.values()))
        )
    finally:
        store.close()
    for s, (h, m) in SLOTS.items():
        lab.gf("lease", "create", "--tenant", TENANT[s], "--node", slot_name(h, m), "--network", f"{TENANT[s]}-net")
    nets = lab.gfj("network", "list")
    return {n["tenant"]: next(g["vlan"] for g in n["segments"] if g["fabric"] == "ethernet") for n in nets}


def _expected(vlans: dict[str, int], held: set[str]) -> dict[str, dict[str, int | None]]:
    out: dict[str, dict[str, int | None]] = {h: {f"vm{m}": QV for m in range(1, 9)} for h in HOSTS}
    for s, (h, mods) in SLOTS.items():
        for m in mods:
            out[h][f"vm{m}"] = vlans[TENANT[s]] if s in held else QV
    return out


def test_lab_makes_the_hypervisor_bridges_and_vm_namespaces(lab: VmLab) -> None:
    prefix = lab.status["prefix"]
    assert {vm_netns(prefix, h, m) for h in HOSTS for m in range(1, 9)} <= list_netns()
    assert lab.vm_tags("gpu-a01") == {f"vm{m}": QV for m in range(1, 9)}  # born quarantined
    fabrics = (lab.home / "fabrics.yaml").read_text()
    assert "switch: hv-gpu-a01" in fabrics and "switch: hv-gpu-a02" in fabrics and "hv-gpu-a03" not in fabrics
    node = {p["name"]: p for p in lab.gfj("node", "show", "gpu-a01")["fabrics"]["ethernet"]["ports"]}
    assert {k: (p["switch"], p.get("gpu")) for k, p in node.items() if k.startswith("vm")} == {
        f"vm{m}": ("hv-gpu-a01", m) for m in range(1, 9)}  # fmt: skip
    leaf = node["eth0"]["switch"]
    hv = next(e for e in yaml.safe_load(fabrics)["ethernet"] if e["options"]["switch"] == "hv-gpu-a01")
    assert hv["uplinks"] == [leaf]
    assert hv["options"]["remote"] == f"unix:{lab.home / 'lab' / 'vmhosts' / 'gpu-a01' / 'db.sock'}"
    # the driver's TRUNKS power reads the hypervisor's uplink (what the site check holds to the VLAN pool)
    with OvsdbSwitchDriver("hv-gpu-a01", hv["options"]["remote"], QV) as drv:
        trunks = drv.trunks()
    assert set(trunks) == {"eth0"} and {2000, 2999} <= (trunks["eth0"] or set()) and QV not in (trunks["eth0"] or {QV})


def test_slots_tag_their_vm_ports_and_the_trunk_carries_exactly_their_tenants(
    lab: VmLab, vlans: dict[str, int]
) -> None:
    want = _expected(vlans, set(SLOTS))
    assert {h: lab.vm_tags(h) for h in HOSTS} == want
    assert lab.trunk("gpu-a01") == {vlans["a"], vlans["b"], vlans["c"]}
    assert lab.trunk("gpu-a02") == {vlans["a"]}
    assert lab.ping(("gpu-a01", 1), ("gpu-a01", 4))  # A to A, one host
    assert lab.ping(("gpu-a01", 2), ("gpu-a02", 3))  # A to A across hosts: through both trunks and the leaf
    assert lab.ping(("gpu-a01", 5), ("gpu-a01", 7))  # B to B
    assert not lab.ping(("gpu-a01", 1), ("gpu-a01", 5))  # A to B
    assert not lab.ping(("gpu-a01", 6), ("gpu-a02", 1))  # C to A on the other host
    audit = lab.gfj("audit")
    assert audit["violations"] == [], audit["violations"]


def test_b_to_quarantine_changes_only_bs_ports_and_the_trunks_b_vlan(lab: VmLab, vlans: dict[str, int]) -> None:
    before = {h: lab.vm_tags(h) for h in HOSTS}
    leases = lab.gfj("lease", "list")
    b = next(x for x in leases if x["node"] == slot_name("gpu-a01", (5, 7)) and x["active"])
    lab.gf("lease", "delete", str(b["id"]))
    after = {h: lab.vm_tags(h) for h in HOSTS}
    changed = {(h, p) for h in HOSTS for p in after[h] if after[h][p] != before[h][p]}
    assert changed == {("gpu-a01", "vm5"), ("gpu-a01", "vm7")}
    assert after == _expected(vlans, set(SLOTS) - {"b"})
    assert lab.trunk("gpu-a01") == {vlans["a"], vlans["c"]}
    assert lab.trunk("gpu-a02") == {vlans["a"]}
    assert not lab.ping(("gpu-a01", 5), ("gpu-a01", 7))  # quarantine: protected ports
    assert lab.ping(("gpu-a01", 1), ("gpu-a02", 4))


def test_bs_slot_leased_to_d_gives_only_its_ports_and_the_trunk_ds_vlan(lab: VmLab, vlans: dict[str, int]) -> None:
    lab.gf("tenant", "create", "d")
    lab.gf("network", "create", "d-net", "--tenant", "d")
    d = next(n for n in lab.gfj("network", "list") if n["tenant"] == "d")
    vlan_d = next(g["vlan"] for g in d["segments"] if g["fabric"] == "ethernet")
    before = {h: lab.vm_tags(h) for h in HOSTS}
    lab.gf("lease", "create", "--tenant", "d", "--node", slot_name("gpu-a01", (5, 7)), "--network", "d-net")
    after = {h: lab.vm_tags(h) for h in HOSTS}
    assert {(h, p) for h in HOSTS for p in after[h] if after[h][p] != before[h][p]} == {
        ("gpu-a01", "vm5"),
        ("gpu-a01", "vm7"),
    }
    assert after["gpu-a01"]["vm5"] == after["gpu-a01"]["vm7"] == vlan_d
    assert lab.trunk("gpu-a01") == {vlans["a"], vlans["c"], vlan_d}
    assert lab.ping(("gpu-a01", 5), ("gpu-a01", 7))  # D to D
    assert not lab.ping(("gpu-a01", 5), ("gpu-a01", 1))  # D to A
    audit = lab.gfj("audit")
    assert audit["violations"] == [], audit["violations"]
