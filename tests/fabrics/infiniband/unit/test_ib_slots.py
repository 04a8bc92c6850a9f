"""The InfiniBand kind on a shared host (issue 33, item 3): each HCA port is the rail of one GPU
(``gpu`` in the inventory) and carries the PKeys of the slot holding that GPU, nothing else.

A hand-built Tenancy: ``gpu-a01`` leased to ``infra`` in ``vm-host`` with eight HCAs (mlx5_i: GPU
i+1) and a ninth without affinity, slots A (GPUs 1-4, tenant acme), B (5-6, beta), C (7-8, gamma);
``gpu-a02`` a whole node leased to delta (its HCAs carry affinity too: ignored off a shared host)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import BUILTIN_OFFERINGS, QUARANTINE, Lease, Network, Node
from gpufabric.domain.slots import slot_name
from gpufabric.domain.values import Guid, PKey
from gpufabric.fabrics.infiniband.entries import IbPort, all_ib_ports, check_rails, dump_ib, parse_ib
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.fabrics.infiniband.plan import as_observed_ib, desired_ib, diff_ib, ib_tenants_seen

from support.ports import port_node
from support.segments import segment

T0 = datetime(2026, 12, 1, tzinfo=UTC)
HOST, BARE = "gpu-a01", "gpu-a02"
A, B, C = slot_name(HOST, (1, 2, 3, 4)), slot_name(HOST, (5, 6)), slot_name(HOST, (7, 8))
PKEY = {"acme": 0x0A01, "beta": 0x0A02, "gamma": 0x0A03, "delta": 0x0A04, "dora": 0x0A05}
SM = Guid(0x0002C9030000FF01)


def hca(node: str, i: int, gpu: int | None) -> IbPort:
    base = 0x0002C90310000000 + (0x1000 if node == BARE else 0)
    return IbPort(node, f"mlx5_{i}", 1, Guid(base + 0x10 * i + 1), Guid(base + 0x10 * i), gpu=gpu)


def rail(i: int) -> Guid:
    """The port GUID of gpu-a01's HCA mlx5_i (GPU module i+1's rail)."""
    return hca(HOST, i, None).port_guid


def net(tenant: str) -> Network:
    return Network(
        f"{tenant}-ib", tenant, (segment("infiniband", 3000 + (PKEY[tenant] & 0xFF), pkey=PKey(PKEY[tenant])),)
    )


def tenancy(slots: dict[str, str | None] | None = None, shared: bool = True) -> Tenancy:
    """Owners of A, B, C (tenant or None: quarantine); the host in vm-host (or, ``shared`` False, baremetal)."""
    own = {A: "acme", B: "beta", C: "gamma"} if slots is None else slots
    nodes = (
        port_node(HOST, ib=(*(hca(HOST, i, i + 1) for i in range(8)), hca(HOST, 8, None))),
        port_node(BARE, ib=(hca(BARE, 0, 1), hca(BARE, 1, 2))),
        Node(A, host=HOST, slot_modules=(1, 2, 3, 4)), Node(B, host=HOST, slot_modules=(5, 6)),
        Node(C, host=HOST, slot_modules=(7, 8)),
    )  # fmt: skip
    leases: dict[str, Lease | None] = {
        HOST: Lease("infra", HOST, T0, offering="vm-host" if shared else "baremetal"),
        BARE: Lease("delta", BARE, T0, networks=("delta-ib",)),
    }
    for slot, t in own.items():
        leases[slot] = Lease(t, slot, T0, networks=(f"{t}-ib",), offering="vm-host") if t else None
    nets = {(n.tenant, n.name): n for n in map(net, PKEY)}
    return Tenancy(nodes, leases, nets, {o.name: o for o in BUILTIN_OFFERINGS}, {"sm_port_guids": (SM,)})


def members(t: Tenancy) -> dict[int, set[Guid]]:
    layout = desired_ib(t, (SM,)).layout
    return {p.pkey.value & 0x7FFF: set(p.full_members()) for p in layout.partitions}


def test_each_slots_pkey_is_exactly_on_its_gpus_rail_hcas() -> None:
    got = members(tenancy())
    assert got[0x0A01] == {rail(i) for i in range(4)}
    assert got[0x0A02] == {rail(4), rail(5)}
    assert got[0x0A03] == {rail(6), rail(7)}
    assert got[0x0A04] == {hca(BARE, 0, 1).port_guid, hca(BARE, 1, 2).port_guid}  # a whole node: every HCA
    assert rail(8) not in set().union(*got.values())  # no affinity on a shared host: the hypervisor's, quarantine
    assert rail(8) in desired_ib(tenancy(), (SM,)).guids  # still managed (its table: the default partition only)


def test_a_slot_to_quarantine_changes_only_its_two_hcas() -> None:
    before = tenancy()
    after = tenancy({A: "acme", B: None, C: "gamma"})
    plan = diff_ib(desired_ib(after, (SM,)), as_observed_ib(desired_ib(before, (SM,))))
    assert {c.guid for c in plan.changes} == {rail(4), rail(5)}
    assert {(c.action.value, c.entry) for c in plan.changes} == {("remove", 0x8A02)}
    assert 0x0A02 not in members(after)


def test_a_slot_moved_to_another_tenant_changes_only_its_hcas() -> None:
    before, after = tenancy(), tenancy({A: "acme", B: "dora", C: "gamma"})
    plan = diff_ib(desired_ib(after, (SM,)), as_observed_ib(desired_ib(before, (SM,))))
    assert {c.guid for c in plan.changes} == {rail(4), rail(5)}
    assert sorted((c.action.value, c.entry) for c in plan.changes) == [("add", 0x8A05)] * 2 + [("remove", 0x8A02)] * 2


def test_gpus_no_slot_holds_are_in_quarantine_and_an_unshared_host_is_unchanged() -> None:
    assert set(members(tenancy({A: "acme"}))) == {0x0A01, 0x0A04}  # B's and C's GPUs held by no slot
    whole = members(tenancy(shared=False))  # baremetal: the host's lease (infra, no network), slots ignored
    assert set(whole) == {0x0A04}


def test_tenants_seen_are_per_slot_on_a_shared_host() -> None:
    t = tenancy()
    seen = ib_tenants_seen(as_observed_ib(desired_ib(t, (SM,))), t)
    assert (seen[A], seen[B], seen[C]) == (frozenset({"acme"}), frozenset({"beta"}), frozenset({"gamma"}))
    assert seen[HOST] == frozenset({QUARANTINE})  # the HCA without affinity
    assert seen[BARE] == frozenset({"delta"})


def test_check_slot_refuses_a_gpu_without_a_rail_hca() -> None:
    host = port_node(HOST, ib=tuple(hca(HOST, i, i + 1) for i in range(6)))
    InfinibandKind().check_slot(host, frozenset({5, 6}))
    with pytest.raises(ValidationError) as err:
        InfinibandKind().check_slot(host, frozenset({7, 8}))
    assert err.value.field == "infiniband.gpu" and err.value.value == 7
    assert "GPU 7 of gpu-a01 has no rail HCA" in str(err.value) and "\n" not in str(err.value)
    check_rails(Node("gpu-b01"), frozenset({1, 2}))  # a host without HCA ports: nothing to give, nothing refused


def test_gpu_entry_is_checked_and_round_trips() -> None:
    raw = [{"device": "mlx5_0", "port_guid": "0x0002c90310000001", "node_guid": "0x0002c90310000000", "gpu": 3}]
    (p,) = parse_ib(HOST, raw, "nodes[0].ib")
    assert p.gpu == 3 and dump_ib((p,)) == [{**raw[0], "port_num": 1}]
    assert all_ib_ports(port_node(HOST, ib=(p,)))[0].gpu == 3
    for bad in (0, 65, "3", True, 2.0):
        with pytest.raises(ValidationError) as err:
            parse_ib(HOST, [{**raw[0], "gpu": bad}], "nodes[0].ib")
        assert err.value.field == "nodes[0].ib[0].gpu"
    with pytest.raises(ValidationError, match=r"ib_port\.gpu"):
        IbPort(HOST, "mlx5_0", 1, Guid(1), Guid(2), gpu=0)
