"""Reading every node with its ports, GPUs and DPUs in five plain SELECTs (SQLAlchemy Core
rows, no ORM identity map): what a worker reads before each converge phase. The result is
exactly ``[node_to_domain(row) for row in ...]`` over the ORM rows, sorted by name — at about
a tenth of the cost for a thousand nodes."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpufabric.domain.models import Dpu, DpuMode, EthernetPort, Gpu, IbPort, Node, NodeState
from gpufabric.domain.values import Guid, ModuleId
from gpufabric.service.convert import canonical
from gpufabric.service.db_models import DpuRow, EthernetPortRow, GpuRow, IbPortRow, NodeRow


def list_nodes(s: Session) -> list[Node]:
    names: dict[int, str] = {}
    heads: list[tuple[int, str, str, str]] = []
    for nid, name, offering, state in s.execute(
        select(NodeRow.id, NodeRow.name, NodeRow.offering, NodeRow.state).order_by(NodeRow.name)
    ):
        names[nid] = name
        heads.append((nid, name, offering, state))
    eth: dict[int, list[EthernetPort]] = defaultdict(list)
    for nid, pname, switch, sport, mac in s.execute(
        select(EthernetPortRow.node_id, EthernetPortRow.name, EthernetPortRow.switch, EthernetPortRow.switch_port,
               EthernetPortRow.mac)
    ):
        eth[nid].append(EthernetPort(names[nid], pname, switch, sport, mac))
    ib: dict[int, list[IbPort]] = defaultdict(list)
    for nid, dev, num, pguid, nguid, sguid, swport in s.execute(
        select(IbPortRow.node_id, IbPortRow.device, IbPortRow.port_num, IbPortRow.port_guid, IbPortRow.node_guid,
               IbPortRow.switch_guid, IbPortRow.switch_port)
    ):
        sw = None if sguid is None else Guid.parse(sguid)
        ib[nid].append(IbPort(names[nid], dev, num, Guid.parse(pguid), Guid.parse(nguid), sw, swport))
    gpus: dict[int, list[Gpu]] = defaultdict(list)
    for nid, module, bus in s.execute(select(GpuRow.node_id, GpuRow.module_id, GpuRow.pci_bus_id)):
        gpus[nid].append(Gpu(names[nid], ModuleId(module), bus))
    dpus: dict[int, list[Dpu]] = defaultdict(list)
    for nid, dname, mode, details in s.execute(select(DpuRow.node_id, DpuRow.name, DpuRow.mode, DpuRow.details)):
        d: dict[str, Any] = details or {}
        dpus[nid].append(Dpu(names[nid], dname, DpuMode(mode), tuple(sorted((str(k), str(v)) for k, v in d.items()))))
    return [
        canonical(Node(name, offering, NodeState(state), tuple(eth[nid]), tuple(ib[nid]), tuple(gpus[nid]),
                       tuple(dpus[nid])))
        for nid, name, offering, state in heads
    ]
