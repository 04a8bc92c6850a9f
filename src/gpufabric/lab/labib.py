"""The lab's InfiniBand subnet for :class:`~gpufabric.lab.lab.Lab`: ibsim, the trusted OpenSM and,
with ``sm_pair``, a standby OpenSM on a second SM host (:class:`~gpufabric.lab.smpair.SmPair`).

Files, under the lab directory::

    ib/        IbFabric run dir (net file, ibsim/OpenSM pids and logs, partitions.conf)
    smpair/    with ``--sm-pair``: sm-02/ (the standby's opensm.conf, partitions.conf, log, pid,
               cache and tmp dirs) and sshd-sm-01/, sshd-sm-02/ (one private sshd per SM host:
               its host key, client key, known_hosts, pid file and the port it listens on)

With the pair the net file gets the second SM host's HCA ``sm-02 mlx5_0`` (leaf-01 port 17,
:func:`~gpufabric.lab.smpair.with_standby_node`); the master is ``sm-01 mlx5_0`` (priority 15),
the standby ``sm-02 mlx5_0`` (priority 10). state.json's ``sm_pair`` records the standby's node,
port GUID and pid, and each SM host's sshd; ``lab status`` names the master by SMInfo (not by
configuration: after a ``kill -9`` of sm-01 it is sm-02). Pure functions of the state where
they can be; the processes are started and stopped only here and in the two classes it uses.

Each function works on one :class:`Subnet` (default :data:`COMPUTE`, the lab's one subnet):
``lab up --ib-subnets 2`` adds :data:`STORAGE` (ib-storage/, smpair-storage/, its own IBSIM
socket, SM hosts sm-03/sm-04; lab/subnets.py brings the subnets up and reports them).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufabric.domain.errors import LabError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.entries import IbPort
from gpufabric.fabrics.infiniband.inventory.match import match_ca_ports
from gpufabric.fabrics.infiniband.inventory.uplinks import leaf_paths, with_paths
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import parse_ibnetdiscover
from gpufabric.lab.ib import SAFE_PARTITIONS, IbFabric
from gpufabric.lab.netfile import (
    SM_NODE,
    FabricSpec,
    hca_port_guid,
    plan_fabric,
    render_netfile,
    storage_guid,
    storage_netfile,
)
from gpufabric.lab.procs import pid_alive
from gpufabric.lab.smpair import COMPUTE_PAIR, STORAGE_PAIR, PairNames, SmPair, with_standby_node

Progress = Callable[[str], None]
PAIR_DIR = "smpair"
SMINFO = re.compile(r"sm guid (0x[0-9a-fA-F]+).*?(SMINFO_\w+)", re.S)


@dataclass(frozen=True)
class Subnet:
    """One of the lab's IB subnets: its fabrics.yaml instance (a two-subnet lab), its run
    directories under the lab directory, its IBSIM_SOCKNAME suffix, its SM hosts and the
    master's port GUID in a generated net file; ``storage``: one HCA ``mlx5_8`` per node
    (:func:`~gpufabric.lab.netfile.storage_netfile`)."""

    instance: str
    ib_dir: str
    pair_dir: str
    sock: str
    names: PairNames
    master_port_guid: Guid
    storage: bool = False

    @property
    def sm_node(self) -> str:
        return self.names.master_node


COMPUTE = Subnet("ib-compute", "ib", PAIR_DIR, "ibsim", COMPUTE_PAIR, hca_port_guid(0, 0))
STORAGE = Subnet("ib-storage", "ib-storage", "smpair-storage", "ibsim-storage", STORAGE_PAIR,
                 storage_guid(hca_port_guid(0, 0)), storage=True)  # fmt: skip


@dataclass(frozen=True)
class NetPlan:
    """What the IB fabric is made of: the net file text, the SM's SIM_HOST, how nodes fill leaves,
    and the node names in order (None with ``--topology``: taken from the discovered CAs)."""

    text: str
    sm_host: str | None
    nodes_per_leaf: int
    order: list[str] | None


@dataclass(frozen=True)
class SmHostStatus:
    name: str  # sm-01, sm-02
    node: str  # its HCA's node description
    port_guid: str
    opensm_pid: int | None
    ssh: str  # host:port of its sshd
    sshd_running: bool


@dataclass(frozen=True)
class SmPairStatus:
    """The lab's SM pair as ``lab status`` shows it: ``master`` is the SM host SMInfo names
    (``""`` when no SM answers), ``master_state`` the SMInfo state it reports."""

    hosts: tuple[SmHostStatus, ...]
    master: str = ""
    master_guid: str = ""
    master_state: str = ""
    sminfo_error: str = ""


def net_plan(topology: Path | None, nodes: int, hcas_per_node: int, sm_pair: bool, sub: Subnet = COMPUTE) -> NetPlan:
    """The lab's net file: ``topology`` as is, else generated (plus sm-02's HCA with ``sm_pair``);
    the storage subnet's always generated (1 HCA per node)."""
    names = sub.names
    if sub.storage:
        spec = FabricSpec(nodes, 1)
        plan = NetPlan(storage_netfile(nodes, names.master), names.master_node, spec.nodes_per_leaf,
                       list(plan_fabric(spec).hosts))  # fmt: skip
    elif topology is not None:
        try:
            text = Path(topology).read_text()
        except OSError as e:
            raise LabError(f"cannot read topology {topology}: {e}", path=str(topology)) from e
        plan = NetPlan(text, SM_NODE if f'"{SM_NODE}"' in text else None, 4, None)
    else:
        spec = FabricSpec(nodes, hcas_per_node)
        layout = plan_fabric(spec)
        plan = NetPlan(render_netfile(layout), SM_NODE, spec.nodes_per_leaf, list(layout.hosts))
    if not sm_pair:
        return plan
    if plan.sm_host is None:
        raise LabError(f"--sm-pair: the topology has no {SM_NODE!r} for the master SM", topology=str(topology))
    if f'"{names.standby_node}"' in plan.text:
        return plan
    return NetPlan(with_standby_node(plan.text, names), plan.sm_host, plan.nodes_per_leaf, plan.order)


def fabric(lab_dir: Path, prefix: str, sm_host: str | None, sub: Subnet = COMPUTE) -> IbFabric:
    return IbFabric(lab_dir / sub.ib_dir, f"{prefix}-{sub.sock}", sm_host)


def pair(lab_dir: Path, fab: IbFabric, sub: Subnet = COMPUTE) -> SmPair:
    return SmPair(fab, lab_dir / sub.pair_dir, sub.names)


def ib_up(
    lab_dir: Path, prefix: str, plan: NetPlan, sm_pair: bool, say: Progress, sub: Subnet = COMPUTE, instance: str = ""
) -> dict[str, Any]:
    """Start ibsim, the trusted OpenSM and (``sm_pair``) the standby and the SM hosts' sshds when
    they are not running; discover the fabric. Returns state.json's IB part, with ``hosts`` (the
    GPU nodes, in order) and ``pids``. ``instance``: the fabric instance the HCA ports are on
    ("" in a one-subnet lab: the default instance)."""
    fab = fabric(lab_dir, prefix, plan.sm_host, sub)
    p = pair(lab_dir, fab, sub)  # used only with ``sm_pair``
    names, tag = sub.names, f"{instance}: " if instance else ""
    fresh = not fab.ibsim_running()
    if fresh:
        say(f"{tag}starting ibsim")
        if sm_pair:
            p.stop()
        fab.stop()
        fab.start_ibsim(plan.text)
    if sm_pair and fresh:  # both SMs start from the same safe default, both SM ports full members
        text = pair_partitions([*([sub.master_port_guid] if plan.order is not None else []), names.standby_port_guid])
        for conf in (fab.partitions_conf, p.partitions_conf):
            if not conf.exists():
                conf.parent.mkdir(parents=True, exist_ok=True)
                conf.write_text(text)
    if not fab.opensm_running():
        if sm_pair and pid_alive(p.standby_pid):
            # sm-02 masters the subnet (after a failover): a restarted sm-01 would only enter
            # STANDBY, never SUBNET UP. Restart the pair as it was made: sm-01 master, sm-02 standby.
            say(f"{tag}{names.standby_node} masters the subnet: stopping it to restart {names.master} as the master")
            p.stop_standby()
        say(f"{tag}starting the trusted OpenSM")
        fab.start_opensm()
    sm_pair_state: dict[str, Any] | None = None
    if sm_pair:
        say(f"{tag}starting the standby OpenSM on {names.standby_node} and one sshd per SM host")
        p.start()  # may restart the master (see SmPair.start_standby): pids read after it
        if fresh:
            mark_last_good(fab, p)
        sm_pair_state = {
            "standby_node": names.standby_node,
            "standby_port_guid": str(names.standby_port_guid),
            "run_dir": str(p.run_dir),
            "sshd": {n: {"host": s.host, "port": s.port} for n, s in p.sshd.items()},
        }
    say(f"{tag}discovering the InfiniBand fabric (ibnetdiscover)")
    topo = parse_ibnetdiscover(fab.run_tool(["ibnetdiscover"], sim_host=plan.sm_host))
    ib_ports, skipped = match_ca_ports(topo)
    ib_ports = with_paths(ib_ports, leaf_paths(topo))  # each port's leaf and spines, as an import finds them
    if sm_pair:  # the master's HCA by its node description: SMInfo may name sm-02 on a reused lab
        sm_guid = next((p.port_guid for ca in topo.cas() if ca.description == plan.sm_host for p in ca.ports), None)
    else:
        sm_guid = sm_guid_of(fab.run_tool(["sminfo"], sim_host=plan.sm_host))
    sm_desc = next(
        (ca.description for ca in topo.cas() for p in ca.ports if p.port_guid == sm_guid), plan.sm_host or ""
    )
    sm_names = {sm_desc.split(" ")[0], *([names.standby] if sm_pair else [])}
    ib_ports = tuple(dataclasses.replace(p, instance=instance) for p in ib_ports if p.node not in sm_names)
    hosts = plan.order if plan.order is not None else sorted({p.node for p in ib_ports}, key=natural)
    if not hosts:
        raise LabError("the fabric has no CA with a 'HOST DEVICE' node description")
    pids: dict[str, int | None] = {"ibsim": fab.ibsim_pid, "opensm": fab.opensm_pid}
    if sm_pair:
        pids["opensm-standby"] = p.standby_pid
    return {
        "sm_host": plan.sm_host,
        "sm_node": sm_desc,
        "sm_port_guid": str(sm_guid) if sm_guid else "",
        "ib_ports": [ib_to_dict(p) for p in ib_ports],
        "skipped_cas": [f"{s.node_guid} {s.description!r}: {s.reason}" for s in skipped],
        "sm_pair": sm_pair_state,
        "hosts": hosts,
        "pids": pids,
    }


def pair_partitions(sm_guids: list[Guid]) -> str:
    """The lab's safe default (:data:`~gpufabric.lab.ib.SAFE_PARTITIONS`) with both SM hosts'
    ports full members of the default partition, as gpufabric renders them (``sm_port_guids``):
    whichever SM masters, the other SM's port is not reported as drift."""
    full = "".join(f", {g}=full" for g in sm_guids)
    return SAFE_PARTITIONS.replace("SELF=full ;", f"SELF=full{full} ;")


def mark_last_good(fab: IbFabric, p: SmPair) -> None:
    """A fresh pair runs both SMs from the same file (the safe default): record it as the last
    good file on both SM hosts, as the driver's first apply would, so the audit compares a
    standby with it (an edit is IB-SM-CONFIG-DIVERGED critical) instead of finding nothing to
    vouch for. Nothing when the two files differ."""
    text = fab.partitions_conf.read_text()
    if p.partitions_conf.read_text() != text:
        return
    for conf in (fab.partitions_conf, p.partitions_conf):
        conf.with_name(conf.name + ".last-good").write_text(text)


def ib_problems(lab_dir: Path, fab: IbFabric, state: dict[str, Any], sub: Subnet = COMPUTE, tag: str = "") -> list[str]:
    """What is not running of the subnet ``state`` describes; ``tag`` prefixes each line."""
    problems, names = [], sub.names
    if not pid_alive(fab.ibsim_pid):
        problems.append(f"{tag}ibsim is not running")
    if not pid_alive(fab.opensm_pid):
        problems.append(f"{tag}the OpenSM of SM host {names.master} ({names.master_node}) is not running"
                        if state.get("sm_pair") else f"{tag}OpenSM is not running")  # fmt: skip
    if state.get("sm_pair"):
        p = pair(lab_dir, fab, sub)
        if not pid_alive(p.standby_pid):
            problems.append(f"{tag}the OpenSM of SM host {names.standby} ({names.standby_node}) is not running")
        problems += [f"{tag}the sshd of SM host {n} is not running" for n in p.sshd if not p.sshd_running(n)]
    return problems


def sm_pair_status(lab_dir: Path, fab: IbFabric, state: dict[str, Any], sub: Subnet = COMPUTE) -> SmPairStatus | None:
    """The pair's processes, and the master as SMInfo names it (one ``sminfo`` as sm-01's HCA)."""
    return pair_status(pair(lab_dir, fab, sub), fab, state) if state.get("sm_pair") else None


def pair_status(p: SmPair, fab: IbFabric, state: dict[str, Any]) -> SmPairStatus:
    """:func:`sm_pair_status` of the pair ``p``."""
    master_guid, n = state.get("sm_port_guid", ""), p.names
    hosts = (
        SmHostStatus(n.master, state.get("sm_node", n.master_node), master_guid, fab.opensm_pid,
                     f"{p.sshd[n.master].host}:{p.sshd[n.master].port}", p.sshd_running(n.master)),
        SmHostStatus(n.standby, n.standby_node, str(n.standby_port_guid), p.standby_pid,
                     f"{p.sshd[n.standby].host}:{p.sshd[n.standby].port}", p.sshd_running(n.standby)),
    )  # fmt: skip
    try:
        out = fab.run_tool(["sminfo"], sim_host=state.get("sm_host"), timeout=10)
    except LabError as e:
        return SmPairStatus(hosts, sminfo_error=e.message)
    m = SMINFO.search(out)
    if m is None:
        return SmPairStatus(hosts, sminfo_error=f"sminfo: {out.strip()[:200]}")
    guid = Guid.parse(m.group(1))
    master = next((h.node for h in hosts if h.port_guid and Guid.parse(h.port_guid) == guid), "")
    return SmPairStatus(hosts, master or f"not a lab SM ({guid})", str(guid), m.group(2))


def restart_trusted_sm(fab: IbFabric, p: SmPair | None, state: dict[str, Any]) -> dict[str, Any]:
    """``lab restart-sm``: restart the trusted SM that masters the subnet, as SMInfo names it.
    ``p``: the lab's pair (None without: the one OpenSM is restarted). sm-01 when it (or no lab
    SM) is master, the standby left running (sm-01 is back well inside the standby's 2 x 1 s
    SMInfo polling; were sm-02 to take over meanwhile, the wait for sm-01's SUBNET UP fails, a
    LabError). When sm-02 masters (after a failover), a restarted sm-02 would only wait in
    STANDBY for sm-01 to time out, and a restarted sm-01 would never reach SUBNET UP (see
    :func:`ib_up`): the pair is restarted as it was made, sm-02 stopped, sm-01 restarted as the
    master, sm-02 started again as its standby. Returns which SMs were restarted and their PIDs."""
    if p is None:
        return {"restarted": [state.get("sm_node", SM_NODE).split(" ")[0]], "opensm_pid": fab.restart_opensm(),
                "master_before": ""}  # fmt: skip
    st, n = pair_status(p, fab, state), p.names
    both = st.master == n.standby_node
    if both:
        p.stop_standby()
    pid = fab.restart_opensm()
    if both:
        p.start_standby()
    return {"restarted": [n.master, n.standby] if both else [n.master], "opensm_pid": fab.opensm_pid or pid,
            "standby_pid": p.standby_pid, "master_before": st.master or st.sminfo_error}  # fmt: skip


def ib_down(lab_dir: Path, prefix: str, sub: Subnet = COMPUTE) -> None:
    """Stop the pair (standby, sshds), rogue SMs, the trusted OpenSM, then ibsim; drop every SM's
    partitions.conf so the next ``up`` starts from the safe default."""
    fab = fabric(lab_dir, prefix, None, sub)
    p = pair(lab_dir, fab, sub)
    p.stop()
    fab.stop()
    fab.partitions_conf.unlink(missing_ok=True)
    p.partitions_conf.unlink(missing_ok=True)


def ib_to_dict(p: IbPort) -> dict[str, Any]:
    return {
        "node": p.node,
        "device": p.device,
        "port_num": p.port_num,
        "port_guid": str(p.port_guid),
        "node_guid": str(p.node_guid),
        "switch_guid": str(p.switch_guid) if p.switch_guid else None,
        "switch_port": p.switch_port,
        **({"instance": p.instance} if p.instance else {}),
        **({"path": [list(t) for t in p.path]} if p.path else {}),
    }


def ib_from_dict(d: dict[str, Any]) -> IbPort:
    return IbPort(
        node=d["node"],
        device=d["device"],
        port_num=d["port_num"],
        port_guid=Guid.parse(d["port_guid"]),
        node_guid=Guid.parse(d["node_guid"]),
        switch_guid=Guid.parse(d["switch_guid"]) if d.get("switch_guid") else None,
        switch_port=d.get("switch_port"),
        instance=d.get("instance", ""),
        path=tuple(tuple(t) for t in d.get("path") or ()),
    )


def natural(name: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def sm_guid_of(sminfo: str) -> Guid | None:
    m = re.search(r"sm guid (0x[0-9a-fA-F]+)", sminfo)
    return Guid.parse(m.group(1)) if m else None
