"""VM slots of shared hosts end to end on the lab (issue 33), through the user's commands, read
back from every fabric by tools that are not gpufabric's drivers: two 8-GPU hosts with 8 rail
HCAs each (ibsim + OpenSM), a hypervisor OVS per host with one VM namespace per GPU on it (its
uplink a trunk on the lab's leaf), and a Fabric Manager stand-in per host (fmpm's command line).

gpu-a01 is leased to ``infra`` as a ``vm-host`` with slots of tenants A (4 GPUs), B (2) and C (2);
gpu-a02, a ``vm-host`` too, holds a slot of A (4) and one of B (2). Shown: a ping matrix between
the VMs of every slot that matches tenancy, the PKey tables of every rail HCA read by SMP, ``fmpm
-l`` with exactly the three partitions of gpu-a01's slots, the leaf trunks' VLAN sets; B's slot
moved to D while an independent sampler reads A's and C's partitions, PKeys and VM port tags
every 50 ms (no change seen); ``kill -9`` of slot moves at random points, never a GPU, an HCA or a
VM port in two tenants, each resumed to its end. Needs root."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from gpufabric.fabrics.infiniband.readers.diags import parse_smpquery_pkeys
from gpufabric.lab.lab import Lab
from gpufabric.lab.vmhost import vm_ip, vm_netns

from e2e.conftest import GF, LabEnv
from e2e.test_move import nets_of

pytestmark = [pytest.mark.root, pytest.mark.slow]
LAB_NODES = 3
LAB_HCAS = 8
LAB_VM_HOSTS = "gpu-a01,gpu-a02"
HOSTS = ("gpu-a01", "gpu-a02")
QV = 4000
WANT = (("gpu-a01", "alpha", 4), ("gpu-a01", "beta", 2), ("gpu-a01", "gamma", 2), ("gpu-a02", "alpha", 4),
        ("gpu-a02", "beta", 2))  # fmt: skip


class Slots:
    """The slots the test leased: name -> (host, tenant, GPU modules)."""

    def __init__(self) -> None:
        self.by_name: dict[str, tuple[str, str, tuple[int, ...]]] = {}

    def of(self, host: str, tenant: str) -> str:
        return next(n for n, (h, t, _m) in self.by_name.items() if h == host and t == tenant)


def vm_tags(lab: LabEnv, host: str) -> dict[int, int | None]:
    """GPU module -> the tag of its VM port on ``host``'s hypervisor bridge (ovs-vsctl)."""
    db = lab.home / "lab" / "vmhosts" / host / "db.sock"
    out = subprocess.run(["ovs-vsctl", f"--db=unix:{db}", "--format=json", "--columns=name,tag", "list", "port"],
                         capture_output=True, text=True, check=True, timeout=30).stdout  # fmt: skip
    return {int(n[2:]): (t if isinstance(t, int) else None) for n, t in json.loads(out)["data"] if n.startswith("vm")}


def trunk(lab: LabEnv, host: str) -> set[int]:
    port = lab.node(host)["ethernet"][0]["ovs_port"]
    db = f"--db=unix:{lab.status['ovsdb_socket']}"
    raw = subprocess.run(["ovs-vsctl", db, "get", "port", port, "trunks"], capture_output=True, text=True,
                         check=True, timeout=30).stdout.strip().strip("[]")  # fmt: skip
    return {int(v) for v in raw.split(",") if v.strip()}


def partitions(lab: LabEnv, host: str) -> dict[int, frozenset[int]]:
    """Active partitions of ``host`` by id with their GPUs (``fmpm -l`` of its stand-in FM)."""
    fm = lab.home / "lab" / "nvlink" / f"{host}.fm"
    out = subprocess.run([sys.executable, "-m", "gpufabric.lab.fmpm_standin", "--unix-domain-socket", str(fm), "-l"],
                         capture_output=True, text=True, timeout=30, check=True).stdout  # fmt: skip
    return {p["partitionId"]: frozenset(g["physicalId"] for g in p["gpuInfo"])
            for p in json.loads(out)["partitionInfo"] if p["isActive"]}  # fmt: skip


def rails(lab: LabEnv, host: str) -> dict[int, str]:
    """GPU module -> the port GUID of its rail HCA: the lab gives mlx5_i to GPU i+1."""
    return {int(p["device"].removeprefix("mlx5_")) + 1: p["port_guid"] for p in lab.node(host)["ib"]}


class Smp:
    """PKey tables by SMP as the SM node (ibnetdiscover once for the LIDs, then smpquery per port)."""

    def __init__(self, lab: LabEnv) -> None:
        from gpufabric.fabrics.infiniband.readers.ibnetdiscover import parse_ibnetdiscover

        self.fab, self.sm = Lab(lab.home).ib_fabric(), lab.status["sm_node"]
        topo = parse_ibnetdiscover(self.fab.run_tool(["ibnetdiscover", "-p"], sim_host=self.sm))
        self.lid = {str(p.port_guid): (p.lid, p.port_num) for n in topo.cas() for p in n.ports if p.lid is not None}

    def pkeys(self, guid: str) -> frozenset[int]:
        """The full-member PKeys (15 bits) of port ``guid``'s table."""
        lid, num = self.lid[guid]
        table = parse_smpquery_pkeys(self.fab.run_tool(["smpquery", "pkeys", str(lid), str(num)], sim_host=self.sm))
        return frozenset(e & 0x7FFF for e in table.entries if e & 0x8000 and e & 0x7FFF != 0x7FFF)


@pytest.fixture(scope="module")
def slots(lab: LabEnv) -> Slots:
    for t in ("infra", "gamma", "delta"):
        lab.gf("tenant", "create", t)
    for t in ("gamma", "delta"):
        lab.gf("network", "create", f"{t}-net", "--tenant", t)
    for h in HOSTS:
        lab.gf("lease", "create", "--node", h, "--tenant", "infra", "--offering", "vm-host", "--no-networks")
    out = Slots()
    for host, tenant, k in WANT:
        lab.gf("lease", "create", "--node", host, "--gpus", str(k), "--tenant", tenant, "--network", f"{tenant}-net")
    for n in lab.gfj("node", "list"):
        if n.get("host"):
            out.by_name[n["name"]] = (n["host"], n["tenant"], tuple(n["slot_modules"]))
    assert sorted((h, t, len(m)) for h, t, m in out.by_name.values()) == sorted(WANT)
    return out


def ping(lab: LabEnv, src: tuple[str, int], dst: tuple[str, int]) -> bool:
    ip = vm_ip(HOSTS.index(dst[0]) + 1, dst[1]).split("/")[0]
    r = subprocess.run(["ip", "netns", "exec", vm_netns(lab.status["prefix"], *src), "ping", "-c", "2", "-i", "0.2",
                        "-W", "1", ip], capture_output=True, timeout=30, check=False)  # fmt: skip
    return r.returncode == 0


def test_every_fabric_holds_each_slot_for_its_tenant(lab: LabEnv, slots: Slots) -> None:
    n = nets_of(lab)
    # Ethernet: each slot's VM ports in its tenant's VLAN, the others quarantined; the trunks exactly the slots' tenants
    for host in HOSTS:
        want = {m: QV for m in range(1, 9)}
        for h, t, mods in slots.by_name.values():
            want.update({m: n[t][0] for m in mods if h == host})
        assert vm_tags(lab, host) == want
    assert trunk(lab, "gpu-a01") == {n["alpha"][0], n["beta"][0], n["gamma"][0]}
    assert trunk(lab, "gpu-a02") == {n["alpha"][0], n["beta"][0]}
    # NVLink: exactly one partition per slot of gpu-a01, of exactly its GPUs
    for host in HOSTS:
        assert sorted(partitions(lab, host).values(), key=min) == sorted(
            (frozenset(m) for h, _t, m in slots.by_name.values() if h == host), key=min)  # fmt: skip
    # InfiniBand: every rail HCA in its slot's tenant's PKey and no other tenant's
    smp = Smp(lab)
    tenant_pkeys = {t: pk for t, (_v, pk) in n.items()}
    for host in HOSTS:
        owner = {m: t for h, t, mods in slots.by_name.values() if h == host for m in mods}
        for m, guid in rails(lab, host).items():
            held = {t for t, pk in tenant_pkeys.items() if pk in smp.pkeys(guid)}
            assert held == ({owner[m]} if m in owner else set()), (host, m, held)
    # the ping matrix between one VM of every slot matches tenancy
    vms = [(h, t, (h, min(mods))) for h, t, mods in slots.by_name.values()]
    pairs = [(a, b) for a in vms for b in vms if a != b]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda ab: ping(lab, ab[0][2], ab[1][2]), pairs))
    wrong = [(a[2], a[1], b[2], b[1], ok) for (a, b), ok in zip(pairs, got, strict=True) if ok != (a[1] == b[1])]
    assert wrong == [], wrong
    audit = lab.gfj("audit")
    assert audit["violations"] == [], audit["violations"]


class Sampler:
    """Reads A's and C's partitions (fmpm -l), VM port tags (ovs-vsctl) and rail PKeys (SMP) of
    gpu-a01, each fabric in its own thread every 50 ms (or as fast as its tool answers)."""

    def __init__(self, lab: LabEnv, slots: Slots, smp: Smp) -> None:
        self.lab, self.smp, self.stop = lab, smp, threading.Event()
        self.watch = [slots.of("gpu-a01", "alpha"), slots.of("gpu-a01", "gamma")]
        self.mods = {s: slots.by_name[s][2] for s in self.watch}
        self.guids = {s: rails(lab, "gpu-a01")[self.mods[s][0]] for s in self.watch}
        self.samples: dict[str, list[Any]] = {"nvlink": [], "ethernet": [], "infiniband": []}
        self.threads = [threading.Thread(target=self._loop, args=(f,), daemon=True) for f in self.samples]

    def read(self, fabric: str) -> Any:
        if fabric == "nvlink":
            mine = {frozenset(m) for m in self.mods.values()}
            return tuple(sorted(i for i, g in partitions(self.lab, "gpu-a01").items() if g in mine))
        if fabric == "ethernet":
            tags = vm_tags(self.lab, "gpu-a01")
            return tuple(tags[m] for s in self.watch for m in self.mods[s])
        return tuple(self.smp.pkeys(self.guids[s]) for s in self.watch)

    def _loop(self, fabric: str) -> None:
        while not self.stop.is_set():
            self.samples[fabric].append(self.read(fabric))
            self.stop.wait(0.05)

    def __enter__(self) -> dict[str, Any]:
        first = {f: self.read(f) for f in self.samples}
        for t in self.threads:
            t.start()
        return first

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)


def test_a_slot_move_leaves_the_other_slots_untouched(lab: LabEnv, slots: Slots) -> None:
    b = slots.of("gpu-a01", "beta")
    sampler = Sampler(lab, slots, Smp(lab))
    with sampler as first:
        moved = lab.gfj("node", "move", b, "--to-tenant", "delta", "--network", "delta-net")
    assert moved["moves"][0]["status"] == "done"
    for fabric, seen in sampler.samples.items():  # A's and C's resources never changed, on any fabric
        assert len(seen) >= 3 and set(seen) == {first[fabric]}, (fabric, len(seen), set(seen), first[fabric])
    n = nets_of(lab)
    assert {vm_tags(lab, "gpu-a01")[m] for m in slots.by_name[b][2]} == {n["delta"][0]}
    assert trunk(lab, "gpu-a01") == {n["alpha"][0], n["delta"][0], n["gamma"][0]}  # beta's VLAN left with its last slot
    slots.by_name[b] = ("gpu-a01", "delta", slots.by_name[b][2])


def _owners(lab: LabEnv, smp: Smp, n: dict[str, tuple[int, int]]) -> dict[str, set[str]]:
    """Every resource of gpu-a01 -> the tenants it is in now, read from the fabrics."""
    vlan_of = {v: t for t, (v, _p) in n.items()}
    pkey_of = {p: t for t, (_v, p) in n.items()}
    out: dict[str, set[str]] = {}
    for m, tag in vm_tags(lab, "gpu-a01").items():
        out[f"vm{m}"] = {vlan_of[tag]} if tag in vlan_of else set()
    for m, guid in rails(lab, "gpu-a01").items():
        out[f"hca{m}"] = {pkey_of[p] for p in smp.pkeys(guid) if p in pkey_of}
    return out


def test_kill_nine_mid_slot_move_never_puts_a_resource_in_two_tenants(lab: LabEnv, slots: Slots) -> None:
    rng = random.Random(33)
    smp = Smp(lab)
    slot = slots.of("gpu-a01", "delta")
    mods = set(slots.by_name[slot][2])
    n = nets_of(lab)
    for to in ("beta", "delta", "beta"):
        env = lab.env
        proc = subprocess.Popen([GF, "node", "move", slot, "--to-tenant", to, "--network", f"{to}-net", "--json"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(rng.uniform(0.3, 2.5))
        proc.kill()
        proc.wait(30)
        owners = _owners(lab, smp, n)
        assert all(len(t) <= 1 for t in owners.values()), owners
        parts = partitions(lab, "gpu-a01")
        assert all(not (g & mods) or g == frozenset(mods) for g in parts.values()), parts  # the slot's GPUs: its own partition or none
        lab.gf("move", "resume", "--stale-after", "0", "--json")
        if lab.gfj("node", "show", slot)["tenant"] != to:  # killed before its request was recorded: run it
            lab.gfj("node", "move", slot, "--to-tenant", to, "--network", f"{to}-net")
        owners = _owners(lab, smp, n)
        assert all(owners[f"{k}{m}"] == {to} for k in ("vm", "hca") for m in mods), owners
        assert frozenset(mods) in partitions(lab, "gpu-a01").values()
    audit = lab.gfj("audit")
    assert audit["violations"] == [], audit["violations"]
