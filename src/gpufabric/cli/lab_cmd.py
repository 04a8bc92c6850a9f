"""``gpufabric lab up|down|status``: the local lab (ibsim + trusted OpenSM + OVS + netns), for real.

State lives under ``$GPUFABRIC_HOME/lab`` (default ``./.gpufabric/lab``). Needs root.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gpufabric.cli.common import JSON_OPT, fabrics_path, home, open_engine, open_store, segment_config
from gpufabric.cli.decl import Group, Option
from gpufabric.cli.output import console, emit_json, escape, table
from gpufabric.domain.serial import jsonable

if TYPE_CHECKING:
    from gpufabric.lab.lab import Lab, LabStatus
    from gpufabric.lab.labib import SmPairStatus

app = Group(no_args_is_help=True)
SM_PAIR_HELP = (
    "Run the subnet's trusted SMs as a master/standby OpenSM pair on two SM hosts (sm-01, sm-02; one sshd "
    "each): gpufabric writes both SMs' partitions files and finds the master by SMInfo. With --ib-subnets 2: "
    "one pair per subnet (storage: sm-03, sm-04)."
)
SUBNETS_HELP = (
    "InfiniBand subnets: 1 (one ibsim fabric) or 2 (a compute subnet with --hcas-per-node HCAs per node and a "
    "storage subnet with one HCA mlx5_8 per node, each its own ibsim fabric and trusted SM; fabrics.yaml instances "
    "ib-compute and ib-storage). Not with --topology."
)


def _lab() -> Lab:
    from gpufabric.lab.lab import Lab

    return Lab(home())


def _show(st: LabStatus) -> None:
    state = "[green]up[/]" if st.running else "[red]down[/]"
    console.print(f"lab {st.prefix} under {st.home}: {state}", highlight=False)
    for p in st.problems:
        console.print(f"  [yellow]![/] {escape(p)}", highlight=False)
    if not st.nodes:
        return
    console.print(
        f"{_subnet_lines(st)}"
        f"  OVSDB unix:{st.ovsdb_socket}  vswitchd in netns {st.ovs_netns}  "
        f"bridges {st.spine_bridge}, {', '.join(st.leaf_bridges)}",
        highlight=False,
    )
    rows = []
    for n in st.nodes:
        eth = "; ".join(
            f"{e.nic} {e.ip} {e.bridge}/{e.ovs_port}{f' in {e.bond}' if e.bond else ''}" for e in n.ethernet
        )
        ib = "; ".join(f"{p.device}/{p.port_num} {p.port_guid}" for p in n.ib)
        rows.append((n.name, n.netns, eth, ib))
    table("lab nodes", ["node", "netns", "ethernet (nic ip bridge/port)", "infiniband (device/port guid)"], rows)
    if st.gpus_per_node:
        console.print(f"  NVLink: {st.gpus_per_node} GPUs per node, one stand-in Fabric Manager each", highlight=False)
    if st.dpu_hosts:
        console.print(
            f"  DPUs (real OVN + ovn-controller, kmock Kubernetes): {', '.join(st.dpu_hosts)}", highlight=False
        )
    for s in st.skipped_cas:
        console.print(f"  skipped CA {escape(s)}", highlight=False)


def _subnet_lines(st: LabStatus) -> str:
    """Each IB subnet: ibsim, OpenSM, the master by SMInfo and (``--sm-pair``) the pair's hosts."""
    two = len(st.subnets) > 1
    out = []
    for s in st.subnets:
        ind = "    " if two else "  "
        master = s.master or f"none answers ({s.sminfo_error})"
        out.append(
            (f"  subnet {s.instance}: master by SMInfo {master}" + (f" ({s.master_state})" if s.master_state else "")
             + "\n" if two else "")
            + f"{ind}ibsim pid {s.ibsim_pid}  IBSIM_SOCKNAME={s.ibsim_sockname}\n"
            f"{ind}OpenSM pid {s.opensm_pid} on {s.sm_node!r}  log {s.opensm_log}\n"
            f"{ind}partitions {s.partitions_conf}\n"
            + _pair_lines(s.sm_pair, ind)
        )  # fmt: skip
    return "".join(out)


def _pair_lines(p: SmPairStatus | None, ind: str = "  ") -> str:
    """The SM pair's hosts and the master as SMInfo names it (empty without ``--sm-pair``)."""
    if p is None:
        return ""
    master = p.master or f"none answers ({p.sminfo_error})"
    lines = [f"{ind}SM pair: master by SMInfo {master}" + (f" ({p.master_state})" if p.master_state else "")]
    for h in p.hosts:
        role = "master" if h.node == p.master else "standby"
        sm = f"OpenSM pid {h.opensm_pid}" if h.opensm_pid else "OpenSM not running"
        ssh = f"sshd {h.ssh}" + ("" if h.sshd_running else " (not running)")
        lines.append(f"{ind}  {h.name} {h.node!r} {h.port_guid} {role}: {sm}, {ssh}")
    return "\n".join(lines) + "\n"


@app.command()
def up(
    nodes: int = Option(6, "--nodes", help="GPU nodes gpu-a01.. (ignored with --topology)."),
    hcas_per_node: int = Option(2, "--hcas-per-node", help="HCAs mlx5_0.. per node."),
    eth_ports_per_node: int = Option(1, "--eth-ports-per-node", help="Ethernet NICs eth0.. per node."),
    topology: Path = Option(None, "--topology", help="Use this ibsim net file as is."),
    gpus_per_node: int = Option(
        8, "--gpus-per-node", help="GPUs per node (0 or 8), each node with a stand-in Fabric Manager."
    ),
    dpus: int = Option(
        0, "--dpus", help="Give the first N nodes a DPU (own OVS + ovn-controller) on a real OVN."
    ),
    bonded: str = Option(
        "", "--bonded", help="Comma-separated nodes whose eth0+eth1 are one LACP bond on their leaf."
    ),
    sm_pair: bool = Option(False, "--sm-pair", help=SM_PAIR_HELP),
    subnets: int = Option(1, "--ib-subnets", help=SUBNETS_HELP),
    vm_hosts: str = Option(
        "", "--vm-hosts", help="Comma-separated nodes with a hypervisor OVS bridge and one VM namespace per GPU."
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Start (or reuse) the lab: ibsim, the trusted OpenSM (with --sm-pair a master/standby pair;
    with --ib-subnets 2 a second ibsim subnet for storage, with its own SM or pair),
    OVS leaf/spine, one netns per node, a stand-in Fabric Manager per node (NVLink) and, with
    --dpus, DPUs on a real OVN."""
    from gpufabric.lab.netns import lab_vlans

    lab = _lab()
    bonds = tuple(n.strip() for n in bonded.split(",") if n.strip())
    vms = tuple(n.strip() for n in vm_hosts.split(",") if n.strip())
    uplinks, qv = lab_vlans(segment_config())
    if json_out:
        st = lab.up(nodes, hcas_per_node, eth_ports_per_node, topology, uplink_vlans=uplinks,
                    gpus_per_node=gpus_per_node, dpus=dpus, bonded=bonds, quarantine_vlan=qv, sm_pair=sm_pair,
                    ib_subnets=subnets, vm_hosts=vms)  # fmt: skip
    else:
        with console.status("bringing the lab up") as spinner:
            st = lab.up(
                nodes, hcas_per_node, eth_ports_per_node, topology, progress=spinner.update, uplink_vlans=uplinks,
                gpus_per_node=gpus_per_node, dpus=dpus, bonded=bonds, quarantine_vlan=qv, sm_pair=sm_pair,
                ib_subnets=subnets, vm_hosts=vms,
            )  # fmt: skip
    result = register(lab, st)
    converged = converge_leases()
    if json_out:
        emit_json({**st.to_dict(), "registered": jsonable(result), "fabrics_yaml": str(fabrics_path()),
                   "leases_converged": converged})  # fmt: skip
        return
    _show(st)
    console.print(f"registered in the store: {result}; drivers in {fabrics_path()}", highlight=False)


def converge_leases() -> int:
    """After a restart the lab's ports come back quarantined: put the store's active leases back
    on the fabrics (one reconcile repair pass). Returns how many changes it made."""
    from datetime import UTC, datetime

    from gpufabric.engine.reconcile import Policy, reconcile_once

    if not open_store().leases(active_at=datetime.now(UTC)):
        return 0
    result = reconcile_once(open_engine(), Policy.REPAIR, resume_moves=False)
    return len(result.drift.lines())


def register(lab: Lab, st: LabStatus) -> object:
    """Register the lab's inventory in the store and write the fabrics.yaml its drivers use."""
    from gpufabric.lab.fabrics_config import write_fabrics_config
    from gpufabric.lab.netns import lab_vlans

    write_fabrics_config(fabrics_path(), lab, st, lab_vlans(segment_config())[1])
    return open_store().upsert_inventory(st.inventory())


@app.command()
def down(json_out: bool = JSON_OPT) -> None:
    """Stop the lab's processes and remove its namespaces, veths and bridges."""
    lab = _lab()
    lab.down()
    if json_out:
        emit_json({"down": True, "home": str(lab.home)})
    else:
        console.print(f"lab {lab.prefix} is down", highlight=False)


@app.command()
def status(json_out: bool = JSON_OPT) -> None:
    """Show the lab: processes, sockets, nodes with their Ethernet and InfiniBand ports."""
    st = _lab().status()
    if json_out:
        emit_json(st.to_dict())
    else:
        _show(st)


@app.command("restart-sm")
def restart_sm(
    subnet: str = Option("", "--subnet", help="The subnet (ib-compute, ib-storage) of a two-subnet lab."),
    json_out: bool = JSON_OPT,
) -> None:
    """Restart the lab's trusted OpenSM (the OpenSM driver's restart command in the lab). With
    ``--sm-pair``: the SM SMInfo names master; both, sm-01 as master, when sm-02 masters."""
    out = _lab().restart_sm(subnet)
    if json_out:
        emit_json(out)
    else:
        console.print(f"trusted OpenSM restarted: {', '.join(out['restarted'])} (pid {out['opensm_pid']})")


@app.command("rogue-sm")
def rogue_sm(
    node: str = Option(..., "--node", help="Tenant host to start the rogue SM on, e.g. gpu-a03."),
    device: str = Option("mlx5_0", "--device"),
    subnet: str = Option("", "--subnet", help="The subnet (ib-compute, ib-storage) of a two-subnet lab."),
    json_out: bool = JSON_OPT,
) -> None:
    """Start a rogue OpenSM on a tenant node, as a tenant with root could (for the rogue-SM defence)."""
    pid = _lab().subnet_fabric(subnet).start_rogue_sm(f"{node} {device}")
    emit_json({"rogue_pid": pid, "node": node}) if json_out else console.print(f"rogue OpenSM on {node} (pid {pid})")
