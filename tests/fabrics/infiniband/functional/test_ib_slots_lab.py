"""A shared host's rails on the lab's InfiniBand (issue 33, item 3): ibsim + OpenSM 3.3.23, two
nodes of 8 HCAs, the lab's inventory (``LabStatus.inventory``: HCA mlx5_i is GPU i+1's rail when a
node has as many HCAs as GPUs), the InfiniBand kind's desired state and diff, the OpenSM driver.

gpu-a01 is a ``vm-host`` (leased to infra) with slots A (GPUs 1-4, acme), B (5-6, beta) and C
(7-8, gamma); gpu-a02 is a whole node leased to delta. Every table is read by SMP from the HCAs:
each slot's PKey is on exactly its GPUs' HCAs; B's move to dora changes B's two HCAs and no other
table of the subnet."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import BUILTIN_OFFERINGS, Lease, Network, Node
from gpufabric.domain.slots import slot_name
from gpufabric.domain.values import Guid, PKey
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMConfig, OpenSMDriver
from gpufabric.fabrics.infiniband.entries import IbPort, all_ib_ports
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.fabrics.infiniband.plan import IbPlan
from gpufabric.fabrics.infiniband.state import IbFabricState
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.lab import LabNode, LabStatus
from gpufabric.lab.netfile import SM_NODE, generate_netfile, hca_node_guid, hca_port_guid, node_name

from support.segments import segment

pytestmark = pytest.mark.root

T0 = datetime(2026, 12, 1, tzinfo=UTC)
SM = hca_port_guid(0, 0)
HOST, BARE = node_name(1), node_name(2)
A, B, C = slot_name(HOST, (1, 2, 3, 4)), slot_name(HOST, (5, 6)), slot_name(HOST, (7, 8))
PKEY = {"acme": 0x0A01, "beta": 0x0A02, "gamma": 0x0A03, "delta": 0x0A04, "dora": 0x0A05}


def lab_nodes() -> tuple[Node, ...]:
    """The lab's inventory of its two 8-HCA nodes (the ports the lab records, the affinity it gives)."""
    ib = {n: tuple(IbPort(node_name(n), f"mlx5_{h}", 1, hca_port_guid(n, h), hca_node_guid(n, h)) for h in range(8))
          for n in (1, 2)}  # fmt: skip
    status = LabStatus("", True, nodes=tuple(LabNode(node_name(n), "", (), ib[n]) for n in (1, 2)), gpus_per_node=8)
    return status.inventory().nodes


def tenancy(b: str) -> Tenancy:
    hosts = {n.name: dataclasses.replace(n, fabric_ports=tuple(p for p in n.fabric_ports if p.instance == "infiniband"))
             for n in lab_nodes()}  # fmt: skip
    slots = {A: ((1, 2, 3, 4), "acme"), B: ((5, 6), b), C: ((7, 8), "gamma")}
    nodes = (*hosts.values(), *(Node(s, host=HOST, slot_modules=m) for s, (m, _) in slots.items()))
    owners: dict[str, Lease | None] = {HOST: Lease("infra", HOST, T0, offering="vm-host"),
                                       BARE: Lease("delta", BARE, T0, networks=("delta-ib",))}  # fmt: skip
    owners.update({s: Lease(t, s, T0, networks=(f"{t}-ib",), offering="vm-host") for s, (_, t) in slots.items()})
    nets = [Network(f"{t}-ib", t, (segment("infiniband", 3000 + (k & 0xFF), pkey=PKey(k)),)) for t, k in PKEY.items()]
    return Tenancy(nodes, owners, {(n.tenant, n.name): n for n in nets}, {o.name: o for o in BUILTIN_OFFERINGS},
                   {"sm_port_guids": (SM,)})  # fmt: skip


def rails() -> list[Guid]:
    """gpu-a01's HCA port GUIDs by GPU module: rails()[m - 1] is module m's."""
    (host,) = (n for n in lab_nodes() if n.name == HOST)
    by_gpu = {p.gpu: p.port_guid for p in all_ib_ports(host)}
    return [by_gpu[m] for m in range(1, 9)]


@pytest.fixture(scope="module")
def drv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenSMDriver]:
    f = IbFabric(tmp_path_factory.mktemp("ib"), f"gf-t-slots-{os.getpid()}", SM_NODE)
    try:
        f.start_ibsim(generate_netfile(2, 8))
        f.start_opensm()
        cfg = OpenSMConfig.from_options(f.driver_options(SM_NODE, [SM]))
        yield OpenSMDriver(dataclasses.replace(cfg, verify_timeout=10, sweep_timeout=30))
    finally:
        f.stop()


def every_port() -> list[Guid]:
    return [p.port_guid for n in lab_nodes() for p in all_ib_ports(n)]


def read(drv: OpenSMDriver) -> dict[Guid, frozenset[int]]:
    """Every HCA port's PKey table, read by SMP now."""
    got = {t.port_guid: frozenset(t.entries) for t in drv.tables(every_port())}
    assert len(got) == 16
    return got


def converge(drv: OpenSMDriver, t: Tenancy) -> IbPlan:
    """The kind's plan against the tables read now, applied; the plan returned."""
    kind = InfinibandKind()
    desired = kind.desired(t)
    plan = kind.diff(desired, IbFabricState(tables=tuple(drv.tables([*every_port(), SM]))))
    assert isinstance(plan, IbPlan)
    drv.apply(desired.layout)
    return plan


def test_the_lab_gives_hca_i_the_rail_of_gpu_i_plus_one() -> None:
    (host,) = (n for n in lab_nodes() if n.name == HOST)
    assert {p.device: p.gpu for p in all_ib_ports(host)} == {f"mlx5_{h}": h + 1 for h in range(8)}


def test_three_slots_pkeys_on_exactly_their_rails_then_one_slot_moves_alone(drv: OpenSMDriver) -> None:
    converge(drv, tenancy("beta"))
    r = rails()
    before = read(drv)
    want = {**{r[m - 1]: 0x8A01 for m in (1, 2, 3, 4)}, **{r[m - 1]: 0x8A02 for m in (5, 6)},
            **{r[m - 1]: 0x8A03 for m in (7, 8)}}  # fmt: skip
    for g, entry in want.items():
        assert before[g] == {0x7FFF, entry}, g
    delta = {hca_port_guid(2, h) for h in range(8)}
    assert all(before[g] == {0x7FFF, 0x8A04} for g in delta)

    plan = converge(drv, tenancy("dora"))
    assert {c.guid for c in plan.changes} == {r[4], r[5]}
    after = read(drv)
    assert {g for g in after if after[g] != before[g]} == {r[4], r[5]}
    assert after[r[4]] == after[r[5]] == {0x7FFF, 0x8A05}
