"""The local lab as one object: ibsim + trusted OpenSM, a private OVS leaf/spine, one netns per node.

Everything lives under ``<home>/lab`` (``home`` is ``$GPUFABRIC_HOME``)::

    state.json     what ``up`` made: prefix, parameters, node ports, names to remove
    ib/            IbFabric run dir (net file, ibsim/OpenSM pids and logs, partitions.conf)
    smpair/        with ``up(sm_pair=True)``: the standby OpenSM on sm-02 and one sshd per SM
                   host (the IB subnet, with or without the pair: lab/labib.py)
    ib-storage/, smpair-storage/
                   with ``up(ib_subnets=2)``: the storage subnet's, likewise (lab/subnets.py)
    ovs/           OvsServer run dir (ovsdb-server in the root namespace, ovs-vswitchd in
                   the namespace ``<prefix>-sw``)
    hosts/<node>/  a bonded node's own OVS (``up(bonded=...)``: eth0+eth1 in an LACP bond on
                   the node's bridge, its vswitchd in the node's namespace; lab/bondhost.py)
    vmhosts/<node>/
                   a VM host's hypervisor OVS (``up(vm_hosts=...)``: bridge ``hv-<node>``, uplink
                   the node's eth0, one VM namespace per GPU on port ``vm<m>``; lab/vmhost.py)

Global names carry the lab prefix ``gf<5 hex of sha1(home)>``: IBSIM_SOCKNAME
``<prefix>-ibsim``, namespaces ``<prefix>-<node>`` and ``<prefix>-sw``, bridges, veths.

``up`` is idempotent: a second call reuses the running processes (same PIDs) and only
creates what is missing. ``down`` stops only the recorded PIDs and removes only the
namespaces / veths / bridges recorded in state.json (plus the lab's own OVS namespace),
and drops partitions.conf so the next ``up`` starts from the safe default; logs are kept.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpufabric.domain.errors import LabError
from gpufabric.domain.models import FabricPorts, Inventory, Node
from gpufabric.fabrics.dpu.entries import Dpu, DpuMode, dpu_ports
from gpufabric.fabrics.ethernet.entries import EthernetPort, with_ethernet
from gpufabric.fabrics.ethernet.segments import DEFAULT_QUARANTINE_VLAN
from gpufabric.fabrics.infiniband.entries import IbPort, with_ib
from gpufabric.fabrics.nvlink.entries import gpu_ports
from gpufabric.lab.bondhost import ensure_host_bond, host_ovs
from gpufabric.lab.extras import DPU_NAME, dpu_details, dpus_down, dpus_up, lab_gpus, nvlink_up, with_rails
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.labib import SmPairStatus, ib_from_dict, ib_to_dict, natural, net_plan
from gpufabric.lab.netfile import SM_NODE
from gpufabric.lab.netns import (
    DEFAULT_UPLINK_VLANS,
    EthPlan,
    EthPortPlan,
    ensure_ethernet,
    list_netns,
    plan_ethernet,
    remove_ethernet,
)
from gpufabric.lab.ovs import OvsServer
from gpufabric.lab.subnets import (
    SubnetStatus,
    check_subnets,
    restart_subnet_sm,
    subnet_fabric,
    subnet_problems,
    subnet_statuses,
    subnets,
    subnets_down,
    subnets_up,
)
from gpufabric.lab.vmhost import ensure_vm_host, hv_bridge, hv_ovs, vm_hosts_down, vm_mac, vm_netns, vm_port

Progress = Callable[[str], None]
STATE_VERSION = 1


@dataclass(frozen=True)
class LabEthPort:
    nic: str
    bridge: str
    ovs_port: str
    mac: str
    ip: str
    bond: str = ""  # the leaf's OVS bond Port this NIC's switch end is a member of
    bond_mode: str = ""


@dataclass(frozen=True)
class LabNode:
    name: str
    netns: str
    ethernet: tuple[LabEthPort, ...]
    ib: tuple[IbPort, ...]


@dataclass(frozen=True)
class LabStatus:
    home: str
    running: bool
    prefix: str = ""
    ibsim_sockname: str = ""
    ibsim_pid: int | None = None
    opensm_pid: int | None = None
    opensm_log: str = ""
    partitions_conf: str = ""
    netfile: str = ""
    sm_node: str = ""  # node description of the trusted SM's HCA, e.g. "sm-01 mlx5_0"
    sm_port_guid: str = ""
    ovsdb_socket: str = ""
    ovs_netns: str = ""
    ovs_pids: tuple[tuple[str, int | None], ...] = ()
    spine_bridge: str = ""
    leaf_bridges: tuple[str, ...] = ()
    nodes: tuple[LabNode, ...] = ()
    skipped_cas: tuple[str, ...] = ()  # CAs whose description is not "HOST DEVICE" (with --topology)
    problems: tuple[str, ...] = ()
    gpus_per_node: int = 0
    nvlink_section: dict[str, Any] | None = None  # the ``nvlink:`` section of fabrics.yaml
    dpu_section: dict[str, Any] | None = None  # the ``dpu:`` section of fabrics.yaml
    dpu_hosts: tuple[str, ...] = ()
    quarantine_vlan: int = DEFAULT_QUARANTINE_VLAN  # the VLAN new node ports were parked on
    sm_pair: SmPairStatus | None = None  # with ``up(sm_pair=True)``: the SM hosts, the master by SMInfo
    subnets: tuple[SubnetStatus, ...] = ()  # every IB subnet (2 with ``up(ib_subnets=2)``), its master by SMInfo
    vm_hosts: tuple[str, ...] = ()  # nodes with a hypervisor OVS and one VM per GPU (lab/vmhost.py)

    def node(self, name: str) -> LabNode | None:
        return next((n for n in self.nodes if n.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ovs_pids"] = dict(self.ovs_pids)
        d["nodes"] = [
            {
                "name": n.name,
                "netns": n.netns,
                "ethernet": [asdict(e) for e in n.ethernet],
                "ib": [ib_to_dict(p) for p in n.ib],
            }
            for n in self.nodes
        ]
        return d

    def inventory(self) -> Inventory:
        """The lab's nodes as the domain inventory (Ethernet switch = OVS bridge, port = OVS port)."""
        return Inventory(
            tuple(
                with_ib(with_ethernet(Node(
                    name=n.name,
                    fabric_ports=tuple(sorted((
                        *gpu_ports(*lab_gpus(n.name, self.gpus_per_node)),
                        *(lab_dpus(n.name) if n.name in self.dpu_hosts else ()),
                    ))),
                ), *(EthernetPort(n.name, e.nic, e.bridge, e.ovs_port, e.mac, e.bond, e.bond_mode) for e in n.ethernet),
                   *self.vm_ports(n.name)), *with_rails(n.ib, self.gpus_per_node))
                for n in self.nodes
            )
        )


    def vm_ports(self, node: str) -> tuple[EthernetPort, ...]:
        """A VM host's VM ports on its hypervisor bridge, one per GPU (``gpu`` = its module id)."""
        if node not in self.vm_hosts:
            return ()
        k = self.vm_hosts.index(node) + 1
        return tuple(EthernetPort(node, vm_port(m), hv_bridge(node), vm_port(m), vm_mac(k, m), gpu=m)
                     for m in range(1, self.gpus_per_node + 1))  # fmt: skip


def lab_dpus(node: str) -> tuple[FabricPorts, ...]:
    """``node``'s lab DPU as the DPU kind keeps it: its entries on the kind's default instance."""
    return dpu_ports(Dpu(node, DPU_NAME, DpuMode.DPU, dpu_details(node)))


class Lab:
    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.dir = self.home / "lab"
        self.state_file = self.dir / "state.json"
        self.prefix = "gf" + hashlib.sha1(str(self.home.resolve()).encode()).hexdigest()[:5]

    # -- the pieces (for drivers and tests) ---------------------------------------------
    def ib_fabric(self, sm_host: str | None = SM_NODE) -> IbFabric:
        state = self._load()
        if state is not None:
            sm_host = state.get("sm_host")
        return IbFabric(self.dir / "ib", f"{self.prefix}-ibsim", sm_host)

    def subnet_fabric(self, instance: str = "") -> IbFabric:
        """The fabric of one subnet (``ib-compute``, ``ib-storage``; "": the compute / only one)."""
        return subnet_fabric(self.dir, self.prefix, self._load() or {}, instance)

    def restart_sm(self, subnet: str = "") -> dict[str, Any]:
        """Restart a subnet's trusted SM(s) (:func:`~gpufabric.lab.labib.restart_trusted_sm`)."""
        return restart_subnet_sm(self.dir, self.prefix, self._load() or {}, subnet)

    def ovs(self) -> OvsServer:
        return OvsServer(self.dir / "ovs", netns=f"{self.prefix}-sw")

    # -- state file ---------------------------------------------------------------------
    def _load(self) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise LabError(f"cannot read lab state {self.state_file}: {e}", path=str(self.state_file)) from e
        return data

    def _save(self, state: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
        tmp.replace(self.state_file)

    # -- up -----------------------------------------------------------------------------
    def up(
        self,
        nodes: int = 6,
        hcas_per_node: int = 2,
        eth_ports_per_node: int = 1,
        topology: Path | None = None,
        progress: Progress | None = None,
        uplink_vlans: tuple[int, int] = DEFAULT_UPLINK_VLANS,
        gpus_per_node: int = 8,
        dpus: int = 0,
        bonded: tuple[str, ...] = (),
        quarantine_vlan: int = DEFAULT_QUARANTINE_VLAN,
        sm_pair: bool = False,
        ib_subnets: int = 1,
        vm_hosts: tuple[str, ...] = (),
    ) -> LabStatus:
        """``uplink_vlans`` and ``quarantine_vlan`` are the configured tenant pool and quarantine VLAN
        (``gpufabric lab up`` reads them from config.yaml): new node ports start on the quarantine VLAN.
        ``sm_pair``: the subnet's trusted SMs are a master/standby pair on sm-01 and sm-02 (lab/labib.py).
        ``ib_subnets`` 2: a storage subnet too, with its own SM(s) (lab/subnets.py).
        ``vm_hosts``: those nodes get a hypervisor OVS and one VM namespace per GPU (lab/vmhost.py)."""
        check_subnets(ib_subnets, topology)
        say = progress or (lambda _msg: None)
        params: dict[str, Any] = {
            "nodes": nodes,
            "hcas_per_node": hcas_per_node,
            "eth_ports_per_node": eth_ports_per_node,
            "topology": str(Path(topology).resolve()) if topology else None,
            "gpus_per_node": gpus_per_node,
            "dpus": dpus,
            "quarantine_vlan": quarantine_vlan,
        }
        if bonded:  # only when asked: a lab brought up before bonds existed stays reusable
            params["bonded"] = sorted(set(bonded), key=natural)
        if sm_pair:  # the same: a lab without the key is one without the pair
            params["sm_pair"] = True
        if ib_subnets != 1:  # and a lab without it has one subnet
            params["ib_subnets"] = ib_subnets
        if vm_hosts:  # the same: a lab without the key has no VM hosts
            params["vm_hosts"] = list(dict.fromkeys(vm_hosts))
        state = self._load()
        # a lab brought up before the quarantine VLAN was a parameter was brought up on the default
        before = None if state is None else {"quarantine_vlan": DEFAULT_QUARANTINE_VLAN, **state.get("params", {})}
        if state is not None and before != params:
            if self.status().running:
                raise LabError(
                    f"the lab is up with other parameters ({state.get('params')}); run `gpufabric lab down` first",
                    params=str(state.get("params")),
                )
            self.down()
            state = None

        plan = net_plan(topology, nodes, hcas_per_node, sm_pair)
        if plan.order is not None and set(bonded) - set(plan.order):  # refused before anything starts
            plan_ethernet(self.prefix, plan.order, eth_ports_per_node, plan.nodes_per_leaf, bonded)
        if vm_hosts and (not gpus_per_node or (plan.order is not None and set(vm_hosts) - set(plan.order))):
            raise LabError(f"vm_hosts: {', '.join(vm_hosts)}: VM hosts are lab nodes with GPUs", vm_hosts=",".join(vm_hosts))
        if set(vm_hosts) & set(bonded):  # one netdev ovs-vswitchd per namespace: the bond's or the hypervisor's
            raise LabError(f"vm_hosts: {', '.join(sorted(set(vm_hosts) & set(bonded)))} also bonded: a node is one or the "
                           "other", vm_hosts=",".join(vm_hosts))  # fmt: skip
        ib = subnets_up(self.dir, self.prefix, plan, nodes, sm_pair, ib_subnets, say)
        hosts, ib_pids = ib.pop("hosts"), ib.pop("pids")

        say("starting Open vSwitch")
        ovs = self.ovs()
        ovs.start()
        eth = dataclasses.replace(
            plan_ethernet(self.prefix, hosts, eth_ports_per_node, plan.nodes_per_leaf, bonded, quarantine_vlan),
            uplink_vlans=uplink_vlans,
        )
        if set(vm_hosts) - set(hosts):
            raise LabError(f"vm_hosts: {', '.join(vm_hosts)}: VM hosts are lab nodes with GPUs ({', '.join(hosts)})",
                           vm_hosts=",".join(vm_hosts))  # fmt: skip
        vms = [vm_netns(self.prefix, n, m) for n in params.get("vm_hosts", []) for m in range(1, gpus_per_node + 1)]
        say(f"creating {len(hosts)} node namespaces and {len(eth.ports)} Ethernet ports")
        record: dict[str, Any] = {
            "version": STATE_VERSION,
            "prefix": self.prefix,
            "params": params,
            **ib,
            "eth": {"spine": eth.spine, "leaves": list(eth.leaves), "ports": [asdict(p) for p in eth.ports]},
            "made": {
                "netns": [*eth.netns, *vms],
                "bridges": [eth.spine, *eth.leaves],
                "veths": [p.ovs_port for p in eth.ports],
            },
            "pids": {**ib_pids, **ovs.pids()},
        }
        self._save(record)  # before making them: an interrupted ``up`` can still be taken down
        ensure_ethernet(ovs, eth)
        bonded_nodes = list(dict.fromkeys(p.node for p in eth.ports if p.bond))
        if bonded_nodes:
            say(f"bonding eth0+eth1 of {', '.join(bonded_nodes)} (LACP; an OVS bridge of their own)")
            ensure_host_bonds(self.dir, eth)
        for k, node in enumerate(params.get("vm_hosts", []), 1):
            say(f"VM host {node}: its own OVS bridge {hv_bridge(node)} and {gpus_per_node} VM namespaces")
            ensure_vm_host(hv_ovs(self.dir, node, f"{self.prefix}-{node}"), self.prefix, node, k, gpus_per_node,
                           uplink_vlans, eth.quarantine_vlan)  # fmt: skip
        if gpus_per_node:
            say(f"starting {len(hosts)} stand-in Fabric Managers (NVLink)")
            record["nvlink_section"] = nvlink_up(self.dir / "nvlink", hosts)
        if dpus:
            dpu_hosts = hosts[:dpus]
            say(f"starting OVN central, {len(dpu_hosts)} DPUs with ovn-controller, and the Kubernetes stand-in")
            record["dpu_hosts"] = dpu_hosts
            self._save(record)
            record["dpu_section"] = dpus_up(self.dir, self.prefix, dpu_hosts)
        self._save(record)
        say("lab is up")
        return self.status()

    # -- status -------------------------------------------------------------------------
    def status(self) -> LabStatus:
        state = self._load()
        if state is None:
            return LabStatus(home=str(self.home), running=False, prefix=self.prefix, problems=("lab is not up",))
        fab = self.ib_fabric()
        ovs = self.ovs()
        ib_subnets = subnet_statuses(self.dir, self.prefix, state)
        eth = EthPlan(
            state["prefix"],
            state["eth"]["spine"],
            tuple(state["eth"]["leaves"]),
            tuple(EthPortPlan(**p) for p in state["eth"]["ports"]),
            quarantine_vlan=int(state.get("params", {}).get("quarantine_vlan", DEFAULT_QUARANTINE_VLAN)),
        )
        ib_ports = [ib_from_dict(d) for _sub, part in subnets(state) for d in part["ib_ports"]]
        problems = subnet_problems(self.dir, self.prefix, state)
        if not ovs.running():
            problems.append("Open vSwitch is not running")
        down_hosts = [n for n, p in _bond_hosts(self.dir, eth).items() if not p.running()]
        if down_hosts:
            problems.append(f"the own Open vSwitch of bonded {', '.join(down_hosts)} is not running")
        missing = set(eth.netns) - list_netns()
        if missing:
            problems.append(f"missing namespaces: {', '.join(sorted(missing))}")
        names = list(dict.fromkeys(p.node for p in eth.ports))
        nodes = tuple(
            LabNode(
                name=n,
                netns=next(p.netns for p in eth.ports if p.node == n),
                ethernet=tuple(
                    LabEthPort(p.nic, p.bridge, p.ovs_port, p.mac, p.ip, p.bond, p.bond_mode)
                    for p in eth.ports
                    if p.node == n
                ),
                ib=tuple(p for p in ib_ports if p.node == n),
            )
            for n in names
        )
        return LabStatus(
            home=str(self.home),
            running=not problems,
            prefix=state["prefix"],
            ibsim_sockname=fab.sockname,
            ibsim_pid=fab.ibsim_pid,
            opensm_pid=fab.opensm_pid,
            opensm_log=str(fab.opensm_log),
            partitions_conf=str(fab.partitions_conf),
            netfile=str(fab.netfile),
            sm_node=state["sm_node"],
            sm_port_guid=state["sm_port_guid"],
            ovsdb_socket=str(ovs.db_socket),
            ovs_netns=ovs.netns or "",
            ovs_pids=tuple(ovs.pids().items()),
            spine_bridge=eth.spine,
            leaf_bridges=eth.leaves,
            nodes=nodes,
            skipped_cas=tuple(state.get("skipped_cas", ())),
            problems=tuple(problems),
            gpus_per_node=int(state.get("params", {}).get("gpus_per_node", 0) or 0),
            nvlink_section=state.get("nvlink_section"),
            dpu_section=state.get("dpu_section"),
            dpu_hosts=tuple(state.get("dpu_hosts", ())),
            quarantine_vlan=eth.quarantine_vlan,
            sm_pair=ib_subnets[0].sm_pair,
            subnets=ib_subnets,
            vm_hosts=tuple(state.get("params", {}).get("vm_hosts", ())),
        )

    # -- down ---------------------------------------------------------------------------
    def down(self) -> None:
        state = self._load() or {}
        made = state.get("made", {})
        dpus_down(self.dir, self.prefix)
        subnets_down(self.dir, self.prefix)
        ovs = self.ovs()
        remove_ethernet(ovs, made.get("bridges", []), made.get("veths", []), [])
        ovs.stop()
        hosts = self.dir / "hosts"  # bonded nodes' own OVS (every run dir there, even of an interrupted up)
        for run_dir in sorted(hosts.iterdir()) if hosts.is_dir() else ():
            OvsServer(run_dir).stop()
        vm_hosts_down(self.dir)
        remove_ethernet(None, [], [], [*made.get("netns", []), f"{self.prefix}-sw"])
        self.state_file.unlink(missing_ok=True)


def _bond_hosts(lab_dir: Path, eth: EthPlan) -> dict[str, OvsServer]:
    return {p.node: host_ovs(lab_dir, p.node, p.netns) for p in eth.ports if p.bond}


def ensure_host_bonds(lab_dir: Path, eth: EthPlan) -> None:
    """Each bonded node's own OVS bridge with the LACP bond of its members (in parallel: each
    is a pair of daemons to start)."""
    hosts = _bond_hosts(lab_dir, eth)
    with ThreadPoolExecutor(max_workers=max(1, min(4, len(hosts)))) as pool:
        futures = [
            pool.submit(ensure_host_bond, ovs, [p.nic for p in members], members[0].mac, members[0].ip)
            for node, ovs in hosts.items()
            for members in ([p for p in eth.ports if p.node == node and p.bond],)
        ]
        for f in futures:
            f.result()
