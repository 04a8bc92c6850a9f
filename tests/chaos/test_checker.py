"""The checker's invariants on constructed samples: each one that violates an invariant is caught
(so each test can fail), and a clean one is not."""

from __future__ import annotations

from chaos.checker import (
    ALL,
    Inventory,
    NodeInv,
    Persistence,
    Sample,
    Segments,
    convergence,
    disagreements,
    failed_outside_quarantine,
    final_state_errors,
    gpu_overlaps,
    latest_failed,
    move_outcomes,
    owners,
    percentile,
    splits,
    unstable,
)
from chaos.readers import parse_ca_lids, parse_fmpm_active, parse_ovs_ports, parse_pkeys

INV = Inventory((NodeInv("n1", ("p1",), ("0xg1",), "fm1"), NodeInv("n2", ("p2",), ("0xg2",), "fm2")), "db", 4000)
SEG = Segments({2000: "alpha", 2001: "beta"}, {0x0A00: "alpha", 0x0A01: "beta"})
FULL = 0x8000


def sample(eth1: tuple[int | None, frozenset[int]] = (2000, frozenset()), ib1: frozenset[int] = frozenset({FULL | 0x0A00}),
           nv1: dict[int, frozenset[int]] | None = None, t: float = 0.0) -> Sample:  # fmt: skip
    return Sample(
        t,
        {"p1": eth1, "p2": (4000, frozenset())},
        {"0xg1": ib1 | {0x7FFF}, "0xg2": frozenset({0x7FFF})},
        {"n1": {0: frozenset(range(1, 9))} if nv1 is None else nv1, "n2": {}},
    )


def test_a_clean_sample_has_no_split_and_agrees() -> None:
    own = owners(sample(), INV, SEG)
    assert own["n1"] == {"ethernet": {"alpha"}, "infiniband": {"alpha"}, "nvlink": {"active"}}
    assert own["n2"] == {"ethernet": {"quarantine"}, "infiniband": {"quarantine"}, "nvlink": {"quarantine"}}
    assert splits(own) == [] and disagreements(own) == {} and gpu_overlaps(sample()) == []


def test_a_node_in_two_tenants_across_fabrics_is_a_split() -> None:
    own = owners(sample(ib1=frozenset({FULL | 0x0A01})), INV, SEG)  # eth alpha, ib beta
    assert len(splits(own)) == 1 and "n1" in splits(own)[0]


def test_an_hca_in_two_tenants_pkeys_is_a_split_even_as_limited_member() -> None:
    assert splits(owners(sample(ib1=frozenset({FULL | 0x0A00, 0x0A01})), INV, SEG))


def test_a_port_trunking_two_tenants_vlans_or_every_vlan_is_a_split() -> None:
    assert splits(owners(sample(eth1=(None, frozenset({2000, 2001}))), INV, SEG))
    own = owners(sample(eth1=(None, frozenset())), INV, SEG)
    assert ALL in own["n1"]["ethernet"] and splits(own)


def test_a_gpu_in_two_active_partitions_is_caught() -> None:
    s = sample(nv1={0: frozenset(range(1, 9)), 1: frozenset({1, 2, 3, 4})})
    assert gpu_overlaps(s) and "GPU 1" in gpu_overlaps(s)[0]


def test_fabrics_that_disagree_are_caught_unless_the_node_moves() -> None:
    own = owners(sample(ib1=frozenset()), INV, SEG)  # eth alpha, ib quarantine: a half-done move
    assert splits(own) == []
    assert set(disagreements(own)) == {"n1"} and disagreements(own, moving=["n1"]) == {}
    own = owners(sample(nv1={}), INV, SEG)  # the FM forgot the active set
    assert "nvlink" in disagreements(own)["n1"]


def test_persistence_flags_only_a_disagreement_longer_than_grace() -> None:
    p = Persistence(grace=5)
    for t in (0, 2, 4):
        p.feed(t, {"n1": "x"})
    p.feed(5, {})
    p.feed(6, {"n1": "x"})
    p.feed(10, {"n1": "x"})
    assert p.violations == []
    p.feed(12, {"n1": "x"})
    assert p.violations == ["n1: x for 6.0s"]


def mv(i: int, node: str, status: str, to: str = "alpha", frm: str = "quarantine") -> dict[str, object]:
    return {"id": i, "node": node, "status": status, "to_tenant": to, "from_tenant": frm}


def test_move_outcomes_lost_duplicated_unfinished_unrequested() -> None:
    hist = [mv(1, "n1", "done"), mv(2, "n2", "failed"), mv(3, "n1", "cancelled")]
    r = move_outcomes({1: "n1", 2: "n2", 3: "n1"}, hist)
    assert (r.lost, r.duplicated, r.unfinished, r.unrequested, r.running_twice) == ([], [], [], [], [])
    assert r.outcomes == {"done": 1, "failed": 1, "cancelled": 1}
    assert move_outcomes({1: "n1", 9: "n1"}, hist[:1]).lost == [9]
    assert move_outcomes({1: "n1"}, hist[:1] * 2).duplicated == [1]
    assert move_outcomes({4: "n1"}, [mv(4, "n1", "running")]).unfinished == [4]
    assert move_outcomes({}, [mv(5, "n1", "done")]).unrequested == [5]
    assert move_outcomes({}, [mv(5, "n1", "done")], ambiguous={"n1": 1}).unrequested == []
    assert move_outcomes({}, [mv(5, "n1", "done")], before=[5]).unrequested == []
    assert move_outcomes({6: "n1", 7: "n1"}, [mv(6, "n1", "running"), mv(7, "n1", "running")]).running_twice == ["n1"]


def test_final_state_a_failed_move_must_leave_its_node_in_quarantine() -> None:
    own = owners(sample(), INV, SEG)  # n1 in alpha, n2 in quarantine
    assert final_state_errors([mv(1, "n1", "done"), mv(2, "n2", "failed", to="beta")], own) == []
    assert final_state_errors([mv(1, "n1", "failed")], own)  # failed, yet in alpha
    assert final_state_errors([mv(1, "n1", "done", to="beta")], own)  # done to beta, yet in alpha
    assert final_state_errors([mv(1, "n1", "cancelled", to="beta", frm="quarantine")], own)  # in neither
    assert final_state_errors([mv(1, "n1", "cancelled", to="beta", frm="alpha")], own) == []


def test_convergence_and_percentiles() -> None:
    healthy = [(0.0, True), (1.0, False), (3.0, False), (4.5, True), (9.0, True)]
    assert convergence([1.0, 5.0, 10.0], healthy) == [3.5, 4.0, None]
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) in (2.0, 3.0) and percentile([1.0, 5.0], 99) == 5.0
    assert percentile([], 50) is None


def test_parsers_of_the_tools_outputs() -> None:
    ovs = '{"data":[["p1",2000,["set",[]]],["up",["set",[]],["set",[2000,2001]]]],"headings":["name","tag","trunks"]}'
    assert parse_ovs_ports(ovs) == {"p1": (2000, frozenset()), "up": (None, frozenset({2000, 2001}))}
    ib = "CA     4  1 0x0002c90310000101 4x SDR - SW     3  1 0x0002c90330000001 ( 'gpu-a01 mlx5_0' - 'leaf-01' )\n"
    assert parse_ca_lids(ib) == {"0x0002c90310000101": (4, 1)}
    assert parse_pkeys("   0: 0xffff 0x8a00 0x0000\n   8: 0x0000\n64 pkeys capacity for this port\n") == {
        0xFFFF,
        0x8A00,
    }
    fm = '{"partitionInfo":[{"partitionId":0,"isActive":1,"gpuInfo":[{"physicalId":1}]},{"partitionId":1,"isActive":0,"gpuInfo":[]}]}'
    assert parse_fmpm_active(fm) == {0: frozenset({1})}


def test_a_failed_move_whose_node_stays_in_a_tenant_is_caught_while_it_stays_failed() -> None:
    own = owners(sample(), INV, SEG)  # n1 in alpha, n2 in quarantine
    hist = [mv(1, "n1", "done"), mv(2, "n1", "failed", to="beta"), mv(3, "n2", "failed")]
    assert latest_failed(hist) == {"n1": 2, "n2": 3}
    assert latest_failed([*hist, mv(4, "n1", "done")]) == {"n2": 3}
    failed = latest_failed(hist)
    assert failed_outside_quarantine(own, failed, failed) == ["n1: move 2 failed but the node is in ['alpha']"]
    assert failed_outside_quarantine(own, failed, {"n2": 3}) == [], "cancelled or retried between the reads"


def test_fabrics_read_at_different_instants_of_a_move_are_not_compared_but_each_still_is() -> None:
    s = sample(ib1=frozenset({FULL | 0x0A01}))  # eth alpha, ib beta: a split if eth held while ib was read
    held = Sample(s.t, s.eth, s.ib, s.nv, eth_after=dict(s.eth))
    assert unstable(held, INV) == frozenset() and splits(owners(held, INV, SEG), unstable(held, INV))
    moved = Sample(s.t, s.eth, s.ib, s.nv, eth_after={**s.eth, "p1": (4000, frozenset())})
    assert unstable(moved, INV) == {"n1"} and splits(owners(moved, INV, SEG), unstable(moved, INV)) == []
    both = sample(eth1=(None, frozenset({2000, 2001})))  # one port in two tenants: a split however it moved
    both = Sample(both.t, both.eth, both.ib, both.nv, eth_after={**both.eth, "p1": (4000, frozenset())})
    assert splits(owners(both, INV, SEG), unstable(both, INV))
