"""The lab's InfiniBand subnets: one (today's lab), or with ``gpufabric lab up --ib-subnets 2`` a
compute subnet and a storage subnet, two ibsim fabrics side by side (issue 20).

* compute (:data:`~gpufabric.lab.labib.COMPUTE`): ``--hcas-per-node`` HCAs ``mlx5_0..`` per
  node, SM host sm-01 (with ``--sm-pair`` sm-01 master, sm-02 standby); run dirs ``ib/`` and
  ``smpair/``; IBSIM_SOCKNAME ``<prefix>-ibsim``; fabrics.yaml instance ``ib-compute``.
* storage (:data:`~gpufabric.lab.labib.STORAGE`): one HCA ``mlx5_8`` per node, its GUIDs
  moved up (:func:`~gpufabric.lab.netfile.storage_netfile`), SM host sm-03 (with the pair:
  sm-03 master, sm-04 standby, each with its own sshd); run dirs ``ib-storage/`` and
  ``smpair-storage/``; IBSIM_SOCKNAME ``<prefix>-ibsim-storage``; instance ``ib-storage``.

Each subnet has its own trusted SM(s), its own run dir and its own ``trusted_sm_guids``.
state.json keeps the compute subnet's part at its top level, as a one-subnet lab's (``sm_host``,
``sm_node``, ``sm_port_guid``, ``ib_ports``, ``skipped_cas``, ``sm_pair``), and the storage
subnet's, with the same keys, under ``subnets.ib-storage``; ``params.ib_subnets`` is 2 (absent: 1).
Both subnets are brought up in parallel (each is ibsim + OpenSM + maybe a pair to start).
:func:`subnet_statuses` gives ``lab status`` each subnet and its master, by SMInfo.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpufabric.domain.errors import LabError, ValidationError
from gpufabric.domain.values import Guid
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.labib import (
    COMPUTE,
    SMINFO,
    STORAGE,
    NetPlan,
    SmPairStatus,
    Subnet,
    fabric,
    ib_down,
    ib_problems,
    ib_up,
    net_plan,
    pair,
    pair_status,
    restart_trusted_sm,
)

Progress = Callable[[str], None]
IB_SUBNETS = (1, 2)
ONE_SUBNET = "infiniband"  # the instance of a one-subnet lab's IB (fabrics.yaml's ``infiniband:``)


@dataclass(frozen=True)
class SubnetStatus:
    """One IB subnet as ``lab status`` shows it; ``master`` is the node description of the SM
    SMInfo names (``""`` when none answers: ``sminfo_error``), ``sm_pair`` with ``--sm-pair``."""

    instance: str
    ibsim_sockname: str
    ibsim_pid: int | None
    opensm_pid: int | None
    opensm_log: str
    partitions_conf: str
    netfile: str
    sm_node: str
    sm_port_guid: str
    master: str = ""
    master_guid: str = ""
    master_state: str = ""
    sminfo_error: str = ""
    sm_pair: SmPairStatus | None = None


def check_subnets(ib_subnets: int, topology: Path | None) -> None:
    """ValidationError naming ``--ib-subnets`` before anything starts."""
    if ib_subnets not in IB_SUBNETS:
        raise ValidationError("--ib-subnets", ib_subnets, "1 (one subnet) or 2 (compute + storage)")
    if ib_subnets == 2 and topology is not None:
        raise ValidationError("--ib-subnets", ib_subnets, "1 with --topology (the storage subnet is generated)")


def subnets(state: dict[str, Any]) -> list[tuple[Subnet, dict[str, Any]]]:
    """Each subnet of the lab with its part of ``state`` (the compute subnet's: ``state`` itself)."""
    storage = (state.get("subnets") or {}).get(STORAGE.instance)
    return [(COMPUTE, state), (STORAGE, storage)] if storage else [(COMPUTE, state)]


def two_subnets(state: dict[str, Any]) -> bool:
    return bool((state.get("subnets") or {}).get(STORAGE.instance))


def subnets_up(
    lab_dir: Path, prefix: str, plan: NetPlan, nodes: int, sm_pair: bool, ib_subnets: int, say: Progress
) -> dict[str, Any]:
    """Bring up the compute subnet of ``plan`` and (``ib_subnets`` 2) the storage subnet, in
    parallel. Returns state.json's IB part (:func:`~gpufabric.lab.labib.ib_up`'s of the compute
    subnet, with ``subnets`` and both subnets' ``pids``; ``hosts``: the GPU nodes)."""
    if ib_subnets == 1:
        return ib_up(lab_dir, prefix, plan, sm_pair, say)
    storage = net_plan(None, nodes, 1, sm_pair, STORAGE)
    with ThreadPoolExecutor(max_workers=2) as pool:
        c = pool.submit(ib_up, lab_dir, prefix, plan, sm_pair, say, COMPUTE, COMPUTE.instance)
        s = pool.submit(ib_up, lab_dir, prefix, storage, sm_pair, say, STORAGE, STORAGE.instance)
        compute, store = c.result(), s.result()
    if store.pop("hosts") != compute["hosts"]:
        raise LabError("the storage subnet's nodes differ from the compute subnet's", what="netfile")
    pids = store.pop("pids")
    compute["pids"].update({f"{k}-storage": v for k, v in pids.items()})
    return {**compute, "subnets": {STORAGE.instance: store}}


def subnets_down(lab_dir: Path, prefix: str) -> None:
    """Stop every subnet the lab may have (the storage subnet's dirs may not exist: nothing then)."""
    ib_down(lab_dir, prefix, STORAGE)
    ib_down(lab_dir, prefix, COMPUTE)


def spec_of(instance: str) -> Subnet:
    """The subnet an instance name of the lab's fabrics.yaml is (``infiniband``: the compute one)."""
    return STORAGE if instance == STORAGE.instance else COMPUTE


def subnet_of(state: dict[str, Any], instance: str) -> tuple[Subnet, dict[str, Any]]:
    """The subnet named ``instance`` ("" or ``infiniband``: the compute subnet) and its state."""
    for sub, part in subnets(state):
        if instance in (sub.instance, *(("", ONE_SUBNET) if sub is COMPUTE else ())):
            return sub, part
    names = ", ".join(s.instance for s, _ in subnets(state)) if two_subnets(state) else ONE_SUBNET
    raise ValidationError("--subnet", instance, names)


def subnet_fabric(lab_dir: Path, prefix: str, state: dict[str, Any], instance: str = "") -> IbFabric:
    sub, part = subnet_of(state, instance)
    return fabric(lab_dir, prefix, part.get("sm_host"), sub)


def restart_subnet_sm(lab_dir: Path, prefix: str, state: dict[str, Any], instance: str = "") -> dict[str, Any]:
    """``lab restart-sm [--subnet NAME]``: :func:`~gpufabric.lab.labib.restart_trusted_sm` of one subnet."""
    sub, part = subnet_of(state, instance)
    fab = subnet_fabric(lab_dir, prefix, state, instance)
    return restart_trusted_sm(fab, pair(lab_dir, fab, sub) if part.get("sm_pair") else None, part)


def subnet_problems(lab_dir: Path, prefix: str, state: dict[str, Any]) -> list[str]:
    """What is not running, of every subnet (each line tagged with its instance with two)."""
    out: list[str] = []
    for sub, part in subnets(state):
        fab = fabric(lab_dir, prefix, part.get("sm_host"), sub)
        out += ib_problems(lab_dir, fab, part, sub, f"{sub.instance}: " if two_subnets(state) else "")
    return out


def subnet_statuses(lab_dir: Path, prefix: str, state: dict[str, Any]) -> tuple[SubnetStatus, ...]:
    """Each subnet, and its master by SMInfo (the pair's status with ``--sm-pair``, else one
    ``sminfo`` as the SM's HCA)."""
    two, out = two_subnets(state), []
    for sub, part in subnets(state):
        fab = fabric(lab_dir, prefix, part.get("sm_host"), sub)
        base = SubnetStatus(
            sub.instance if two else ONE_SUBNET, fab.sockname, fab.ibsim_pid, fab.opensm_pid, str(fab.opensm_log),
            str(fab.partitions_conf), str(fab.netfile), part.get("sm_node", ""), part.get("sm_port_guid", ""),
        )  # fmt: skip
        if part.get("sm_pair"):
            p = pair_status(pair(lab_dir, fab, sub), fab, part)
            master = (p.master, p.master_guid, p.master_state, p.sminfo_error)
        else:
            p, master = None, _sminfo(fab, part)
        out.append(replace(base, master=master[0], master_guid=master[1], master_state=master[2],
                           sminfo_error=master[3], sm_pair=p))  # fmt: skip
    return tuple(out)


def _sminfo(fab: IbFabric, part: dict[str, Any]) -> tuple[str, str, str, str]:
    """(master node, GUID, state, error) by one ``sminfo`` as the subnet's SM HCA."""
    try:
        out = fab.run_tool(["sminfo"], sim_host=part.get("sm_host"), timeout=10)
    except LabError as e:
        return "", "", "", e.message
    m = SMINFO.search(out)
    if m is None:
        return "", "", "", f"sminfo: {out.strip()[:200]}"
    guid = Guid.parse(m.group(1))
    mine = part.get("sm_port_guid") and Guid.parse(part["sm_port_guid"]) == guid
    return (part.get("sm_node", "") if mine else f"not a lab SM ({guid})"), str(guid), m.group(2), ""
