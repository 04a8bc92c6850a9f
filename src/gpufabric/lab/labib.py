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
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufabric.domain.errors import LabError
from gpufabric.domain.models import IbPort
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.ibnetdiscover import match_ca_ports, parse_ibnetdiscover
from gpufabric.lab.ib import SAFE_PARTITIONS, IbFabric
from gpufabric.lab.netfile import SM_NODE, FabricSpec, hca_port_guid, plan_fabric, render_netfile
from gpufabric.lab.procs import pid_alive
from gpufabric.lab.smpair import STANDBY_NODE, STANDBY_PORT_GUID, SmPair, with_standby_node

Progress = Callable[[str], None]
PAIR_DIR = "smpair"
SMINFO = re.compile(r"sm guid (0x[0-9a-fA-F]+).*?(SMINFO_\w+)", re.S)


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


def net_plan(topology: Path | None, nodes: int, hcas_per_node: int, sm_pair: bool) -> NetPlan:
    """The lab's net file: ``topology`` as is, else generated (plus sm-02's HCA with ``sm_pair``)."""
    if topology is not None:
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
    if f'"{STANDBY_NODE}"' in plan.text:
        return plan
    return NetPlan(with_standby_node(plan.text), plan.sm_host, plan.nodes_per_leaf, plan.order)


def fabric(lab_dir: Path, prefix: str, sm_host: str | None) -> IbFabric:
    return IbFabric(lab_dir / "ib", f"{prefix}-ibsim", sm_host)


def pair(lab_dir: Path, fab: IbFabric) -> SmPair:
    return SmPair(fab, lab_dir / PAIR_DIR)


def ib_up(lab_dir: Path, prefix: str, plan: NetPlan, sm_pair: bool, say: Progress) -> dict[str, Any]:
    """Start ibsim, the trusted OpenSM and (``sm_pair``) the standby and the SM hosts' sshds when
    they are not running; discover the fabric. Returns state.json's IB part, with ``hosts`` (the
    GPU nodes, in order) and ``pids``."""
    fab = fabric(lab_dir, prefix, plan.sm_host)
    fresh = not fab.ibsim_running()
    if fresh:
        say("starting ibsim")
        if sm_pair:
            pair(lab_dir, fab).stop()
        fab.stop()
        fab.start_ibsim(plan.text)
    if sm_pair and fresh:  # both SMs start from the same safe default, both SM ports full members
        text = pair_partitions([*([hca_port_guid(0, 0)] if plan.order is not None else []), STANDBY_PORT_GUID])
        for conf in (fab.partitions_conf, pair(lab_dir, fab).partitions_conf):
            if not conf.exists():
                conf.parent.mkdir(parents=True, exist_ok=True)
                conf.write_text(text)
    if not fab.opensm_running():
        if sm_pair and pid_alive(pair(lab_dir, fab).standby_pid):
            # sm-02 masters the subnet (after a failover): a restarted sm-01 would only enter
            # STANDBY, never SUBNET UP. Restart the pair as it was made: sm-01 master, sm-02 standby.
            say(f"{STANDBY_NODE} masters the subnet: stopping it to restart sm-01 as the master")
            pair(lab_dir, fab).stop_standby()
        say("starting the trusted OpenSM")
        fab.start_opensm()
    sm_pair_state: dict[str, Any] | None = None
    if sm_pair:
        say(f"starting the standby OpenSM on {STANDBY_NODE} and one sshd per SM host")
        p = pair(lab_dir, fab)
        p.start()  # may restart the master (see SmPair.start_standby): pids read after it
        if fresh:
            mark_last_good(fab, p)
        sm_pair_state = {
            "standby_node": STANDBY_NODE,
            "standby_port_guid": str(STANDBY_PORT_GUID),
            "run_dir": str(p.run_dir),
            "sshd": {n: {"host": s.host, "port": s.port} for n, s in p.sshd.items()},
        }
    say("discovering the InfiniBand fabric (ibnetdiscover)")
    topo = parse_ibnetdiscover(fab.run_tool(["ibnetdiscover"], sim_host=plan.sm_host))
    ib_ports, skipped = match_ca_ports(topo)
    if sm_pair:  # the master's HCA by its node description: SMInfo may name sm-02 on a reused lab
        sm_guid = next((p.port_guid for ca in topo.cas() if ca.description == plan.sm_host for p in ca.ports), None)
    else:
        sm_guid = sm_guid_of(fab.run_tool(["sminfo"], sim_host=plan.sm_host))
    sm_desc = next(
        (ca.description for ca in topo.cas() for p in ca.ports if p.port_guid == sm_guid), plan.sm_host or ""
    )
    sm_names = {sm_desc.split(" ")[0], *([STANDBY_NODE.split(" ")[0]] if sm_pair else [])}
    ib_ports = tuple(p for p in ib_ports if p.node not in sm_names)
    hosts = plan.order if plan.order is not None else sorted({p.node for p in ib_ports}, key=natural)
    if not hosts:
        raise LabError("the fabric has no CA with a 'HOST DEVICE' node description")
    pids: dict[str, int | None] = {"ibsim": fab.ibsim_pid, "opensm": fab.opensm_pid}
    if sm_pair:
        pids["opensm-standby"] = pair(lab_dir, fab).standby_pid
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


def ib_problems(lab_dir: Path, fab: IbFabric, state: dict[str, Any]) -> list[str]:
    problems = []
    if not pid_alive(fab.ibsim_pid):
        problems.append("ibsim is not running")
    if not pid_alive(fab.opensm_pid):
        problems.append(f"the OpenSM of SM host sm-01 ({SM_NODE}) is not running" if state.get("sm_pair") else
                        "OpenSM is not running")  # fmt: skip
    if state.get("sm_pair"):
        p = pair(lab_dir, fab)
        if not pid_alive(p.standby_pid):
            problems.append(f"the OpenSM of SM host sm-02 ({STANDBY_NODE}) is not running")
        problems += [f"the sshd of SM host {n} is not running" for n in p.sshd if not p.sshd_running(n)]
    return problems


def sm_pair_status(lab_dir: Path, fab: IbFabric, state: dict[str, Any]) -> SmPairStatus | None:
    """The pair's processes, and the master as SMInfo names it (one ``sminfo`` as sm-01's HCA)."""
    return pair_status(pair(lab_dir, fab), fab, state) if state.get("sm_pair") else None


def pair_status(p: SmPair, fab: IbFabric, state: dict[str, Any]) -> SmPairStatus:
    """:func:`sm_pair_status` of the pair ``p``."""
    master_guid = state.get("sm_port_guid", "")
    hosts = (
        SmHostStatus("sm-01", state.get("sm_node", SM_NODE), master_guid, fab.opensm_pid,
                     f"{p.sshd['sm-01'].host}:{p.sshd['sm-01'].port}", p.sshd_running("sm-01")),
        SmHostStatus("sm-02", STANDBY_NODE, str(STANDBY_PORT_GUID), p.standby_pid,
                     f"{p.sshd['sm-02'].host}:{p.sshd['sm-02'].port}", p.sshd_running("sm-02")),
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
        return {"restarted": ["sm-01"], "opensm_pid": fab.restart_opensm(), "master_before": ""}
    st = pair_status(p, fab, state)
    both = st.master == STANDBY_NODE
    if both:
        p.stop_standby()
    pid = fab.restart_opensm()
    if both:
        p.start_standby()
    return {"restarted": ["sm-01", "sm-02"] if both else ["sm-01"], "opensm_pid": fab.opensm_pid or pid,
            "standby_pid": p.standby_pid, "master_before": st.master or st.sminfo_error}  # fmt: skip


def ib_down(lab_dir: Path, prefix: str) -> None:
    """Stop the pair (standby, sshds), rogue SMs, the trusted OpenSM, then ibsim; drop every SM's
    partitions.conf so the next ``up`` starts from the safe default."""
    fab = fabric(lab_dir, prefix, None)
    p = pair(lab_dir, fab)
    p.stop()
    fab.stop()
    (lab_dir / "ib" / "partitions.conf").unlink(missing_ok=True)
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
    )


def natural(name: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def sm_guid_of(sminfo: str) -> Guid | None:
    m = re.search(r"sm guid (0x[0-9a-fA-F]+)", sminfo)
    return Guid.parse(m.group(1)) if m else None
