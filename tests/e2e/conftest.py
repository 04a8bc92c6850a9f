"""End-to-end fixtures: a real lab (ibsim + OpenSM + OVS + netns) driven through the
``gpufabric`` command, and readers of the fabrics' real state that do not go through
gpufabric's drivers (ovs-vsctl; ibnetdiscover + smpquery by SMP)."""

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

from gpufabric.fabrics.infiniband.readers.diags import parse_smpquery_pkeys
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import parse_ibnetdiscover
from gpufabric.lab.lab import Lab

GF = str(Path(sys.executable).parent / "gpufabric")


@dataclass
class LabEnv:
    home: Path
    status: dict[str, Any]

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "GPUFABRIC_HOME": str(self.home), "GPUFABRIC_DB": ""}

    def gf(
        self, *args: str, check: bool = True, extra_env: dict[str, str] | None = None, timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        p = subprocess.run(
            [GF, *args],
            env={**self.env, **(extra_env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and p.returncode != 0:
            raise AssertionError(f"gpufabric {' '.join(args)} exited {p.returncode}: {p.stdout}\n{p.stderr}")
        return p

    def gfj(self, *args: str, **kw: Any) -> Any:
        return json.loads(self.gf(*args, "--json", **kw).stdout)

    # ---- readers of the real fabrics, independent of gpufabric's drivers
    def ovs_tag(self, port: str) -> int | None:
        out = subprocess.run(
            ["ovs-vsctl", f"--db=unix:{self.status['ovsdb_socket']}", "get", "port", port, "tag"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return None if out in ("[]", "") else int(out)

    def ovs_set_tag(self, port: str, tag: int) -> None:
        subprocess.run(
            ["ovs-vsctl", f"--db=unix:{self.status['ovsdb_socket']}", "set", "port", port, f"tag={tag}"], check=True
        )

    def pkey_tables(self) -> dict[str, frozenset[int]]:
        """Port GUID -> raw PKey table entries, read by SMP as the SM node."""
        fab = Lab(self.home).ib_fabric()
        sm = self.status["sm_node"]
        topo = parse_ibnetdiscover(fab.run_tool(["ibnetdiscover", "-p"], sim_host=sm))
        out: dict[str, frozenset[int]] = {}
        for n in topo.cas():
            for p in n.ports:
                if p.port_guid is None or p.lid is None:
                    continue
                text = fab.run_tool(["smpquery", "pkeys", str(p.lid), str(p.port_num)], sim_host=sm)
                out[str(p.port_guid)] = frozenset(parse_smpquery_pkeys(text).entries)
        return out

    def ping(self, src: str, dst: str) -> bool:
        """One bounded ping from node ``src``'s namespace to ``dst``'s first IP, after OVS has
        revalidated its flows (a VLAN change reaches the datapath asynchronously)."""
        ctl = self.home / "lab" / "ovs" / "ovs-vswitchd.ctl"
        subprocess.run(["ovs-appctl", "-t", str(ctl), "revalidator/wait"], capture_output=True, timeout=30, check=True)
        ip = self.node(dst)["ethernet"][0]["ip"].split("/")[0]
        p = subprocess.run(
            ["ip", "netns", "exec", self.node(src)["netns"], "ping", "-c", "2", "-i", "0.2", "-W", "1", ip],
            capture_output=True,
            timeout=30,
            check=False,
        )
        return p.returncode == 0

    def nvlink_active(self, node: str) -> set[int]:
        """Active NVLink partition ids of ``node``, read from its (stand-in) Fabric Manager with fmpm -l."""
        fm = self.home / "lab" / "nvlink" / f"{node}.fm"
        out = subprocess.run(
            [sys.executable, "-m", "gpufabric.lab.fmpm_standin", "--unix-domain-socket", str(fm), "-l"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout  # fmt: skip
        return {p["partitionId"] for p in json.loads(out)["partitionInfo"] if p["isActive"]}

    def dpu_tenant_switches(self, node: str) -> set[str]:
        """OVN logical switches holding a logical port of ``node``'s DPU (read from the NB database)."""
        nb = f"unix:{self.home / 'lab' / 'ovn' / 'central' / 'ovnnb.sock'}"
        out = subprocess.run(["ovn-nbctl", f"--db={nb}", "--format=json", "list", "Logical_Switch"],
                             capture_output=True, text=True, timeout=30, check=True).stdout  # fmt: skip
        data = json.loads(out)
        cols = data["headings"]
        ports = subprocess.run(["ovn-nbctl", f"--db={nb}", "--format=json", "--columns=_uuid,name", "list",
                                "Logical_Switch_Port"], capture_output=True, text=True, timeout=30, check=True).stdout  # fmt: skip
        names = {row[0][1]: row[1] for row in json.loads(ports)["data"]}
        found: set[str] = set()
        for row in data["data"]:
            rec = dict(zip(cols, row, strict=True))
            members = rec["ports"][1] if rec["ports"][0] == "set" else [rec["ports"]]
            if any(names.get(m[1], "").startswith(f"{node}.") for m in members):
                found.add(rec["name"])
        return found

    def node(self, name: str) -> dict[str, Any]:
        return next(n for n in self.status["nodes"] if n["name"] == name)

    def eth_ports(self, name: str) -> list[str]:
        """The OVS ports carrying the node's VLANs: its access ports, or its bond (not the members)."""
        return list(dict.fromkeys(e.get("bond") or e["ovs_port"] for e in self.node(name)["ethernet"]))

    def guids(self, name: str) -> list[str]:
        return [p["port_guid"] for p in self.node(name)["ib"]]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[LabEnv]:
    """A lab per test module: ``LAB_NODES`` in the module (default 4) nodes, ``LAB_HCAS`` (default 1) HCAs each;
    ``LAB_BONDED`` (default none) the comma-separated nodes whose eth0+eth1 are an LACP bond;
    ``LAB_SM_PAIR`` (default False) the subnet's trusted SMs as a master/standby pair (``--sm-pair``);
    ``LAB_IB_SUBNETS`` (default 1) the IB subnets (2: compute + storage, ``--ib-subnets 2``);
    ``LAB_GPUS`` (default: the lab's, 8) the GPUs per node (0: no NVLink stand-ins);
    ``LAB_VM_HOSTS`` (default none) the comma-separated nodes that host VMs (``--vm-hosts``)."""
    home = tmp_path_factory.mktemp("gfhome")
    env = LabEnv(home, {})
    nodes = str(getattr(request.module, "LAB_NODES", 4))
    dpus = str(getattr(request.module, "LAB_DPUS", 0))
    bonded = str(getattr(request.module, "LAB_BONDED", ""))
    extra = ("--bonded", bonded) if bonded else ()
    if getattr(request.module, "LAB_SM_PAIR", False):
        extra += ("--sm-pair",)
    if getattr(request.module, "LAB_IB_SUBNETS", 1) != 1:
        extra += ("--ib-subnets", str(request.module.LAB_IB_SUBNETS))
    if getattr(request.module, "LAB_VM_HOSTS", ""):  # issue 33: hypervisor OVS + VM namespaces on these nodes
        extra += ("--vm-hosts", str(request.module.LAB_VM_HOSTS))
    if hasattr(request.module, "LAB_GPUS"):
        extra += ("--gpus-per-node", str(request.module.LAB_GPUS))
    hcas = str(getattr(request.module, "LAB_HCAS", 1))
    env.status = env.gfj("lab", "up", "--nodes", nodes, "--hcas-per-node", hcas, "--dpus", dpus, *extra)
    try:
        env.gf("tenant", "create", "alpha")
        env.gf("tenant", "create", "beta")
        env.gf("network", "create", "alpha-net", "--tenant", "alpha")
        env.gf("network", "create", "beta-net", "--tenant", "beta")
        yield env
    finally:
        env.gf("lab", "down", check=False)


def owner_of_ports(lab: LabEnv, node: str, nets: dict[str, tuple[int, int]], quarantine_vlan: int = 4000) -> set[str]:
    """Every owner the node's ports are in, read from OVS and by SMP: tenant names or 'quarantine'."""
    owners: set[str] = set()
    for port in lab.eth_ports(node):
        tag = lab.ovs_tag(port)
        owners |= {t for t, (vlan, _pk) in nets.items() if vlan == tag}
        if tag == quarantine_vlan:
            owners.add("quarantine")
    tables = lab.pkey_tables()
    for g in lab.guids(node):
        keys = {e & 0x7FFF for e in tables[g] if e & 0x8000}
        in_tenants = {t for t, (_v, pk) in nets.items() if pk in keys}
        owners |= in_tenants or {"quarantine"}
    return owners
