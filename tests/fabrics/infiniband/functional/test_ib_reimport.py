"""An ibnetdiscover re-import on a real store (SQLite) after tenants rewrote their HCAs' node
descriptions (issue 31, item 1): a description is a claim, not an identity. Each import is the
one ``gpufabric inventory import --format ibnetdiscover`` runs (``workflow.kind_import.read``,
then ``Store.upsert_inventory``), on the recorded output of the lab's fabric (6 nodes x 2 HCAs +
the SM host) with the descriptions edited as ibnetdiscover would print them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.hooks import ImportReport
from gpufabric.domain.models import NodeState
from gpufabric.fabrics.infiniband.entries import all_ib_ports
from gpufabric.fabrics.infiniband.inventory.importer import import_format
from gpufabric.store.core import ImportResult, Store
from gpufabric.workflow import kind_import

TOPO = (Path(__file__).parents[3] / "fixtures" / "ibnetdiscover" / "lab-6x2-sm.topology.txt").read_text()
A01_1 = "0x0002c90310000111"  # "gpu-a01 mlx5_1", cabled to leaf-01 port 2
A02_0 = "0x0002c90310000201"  # "gpu-a02 mlx5_0"
A03_0 = "0x0002c90310000301"  # "gpu-a03 mlx5_0"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(f"sqlite:///{tmp_path}/gf.db")
    first = run(s, TOPO)
    assert first[1].added == 7
    yield s
    s.close()


def run(store: Store, text: str, *confirm: str, strict: bool = False) -> tuple[ImportReport, ImportResult]:
    extra = {"confirm": confirm} if confirm else {}
    report = kind_import.read(import_format(), text, {}, store.nodes, None, strict, None, **extra)
    return report, store.upsert_inventory(report.inventory)


def describe(text: str, old: str, new: str) -> str:
    """The output after root on a host set ``old``'s node description to ``new`` (rdma-ndd)."""
    assert f'"{old}"' in text
    return text.replace(f'"{old}"', f'"{new}"')


def guids(store: Store, node: str) -> set[str]:
    return {str(p.port_guid) for p in all_ib_ports(store.node(node))}


def test_a_skipped_ca_keeps_its_port_and_its_guid_cannot_be_described_into_another_node(store: Store) -> None:
    """The issue's reproduction: a firmware-default description made gpu-a01's HCA skipped and its
    port dropped (gpu-a01 in quarantine), then "gpu-a02 mlx5_9" made it leased gpu-a02's port."""
    store.set_node_state("gpu-a02", NodeState.LEASED)
    before = {n.name: n for n in store.nodes()}
    skipped, res = run(store, describe(TOPO, "gpu-a01 mlx5_1", "MT4123 ConnectX6   Mellanox Technologies"))
    assert A01_1 in guids(store, "gpu-a01"), "a skipped CA removed a known port"
    assert res.updated == 0 and {n.name: n for n in store.nodes()} == before
    assert any("firmware-default" in line for line in skipped.lines)
    claimed, res = run(store, describe(TOPO, "gpu-a01 mlx5_1", "gpu-a02 mlx5_9"))
    assert A01_1 in guids(store, "gpu-a01") and A01_1 not in guids(store, "gpu-a02")
    assert res.updated == 0 and {n.name: n for n in store.nodes()} == before
    (held,) = claimed.pending
    assert (held["port_guid"], held["change"], held["was"], held["node"]) == (A01_1, "move", "gpu-a01", "gpu-a02")
    assert "leased" in str(held["blocked"])  # gpu-a02 is a tenant's: not even a confirmation moves it
    assert any(line.startswith(f"held move of port {A01_1}") for line in claimed.lines)
    again, _ = run(store, describe(TOPO, "gpu-a01 mlx5_1", "gpu-a02 mlx5_9"), "all")
    assert again.pending == claimed.pending and A01_1 in guids(store, "gpu-a01")


def test_a_lessee_cannot_drop_an_idle_nodes_port_with_a_duplicate_description(store: Store) -> None:
    store.set_node_state("gpu-a02", NodeState.LEASED)
    before = {n.name: n for n in store.nodes()}
    report, res = run(store, describe(TOPO, "gpu-a02 mlx5_0", "gpu-a03 mlx5_0"))  # now two CAs say it
    assert A03_0 in guids(store, "gpu-a03") and A02_0 in guids(store, "gpu-a02")
    assert {n.name: n for n in store.nodes()} == before and res.updated == 0
    assert report.pending == ()  # both CAs are skipped (duplicate); their ports are known: nothing to hold


def test_a_leased_nodes_description_does_not_make_every_reimport_fail(store: Store) -> None:
    """Before: a rename on a leased node changed its ports (the store refused the whole import),
    and a description naming another node refused it too (check_guid_moves)."""
    store.set_node_state("gpu-a02", NodeState.LEASED)
    for new in ("gpu-a02 mlx5_7", "gpu-a04 mlx5_5", "no-device-here", "x" * 70):
        report, res = run(store, describe(TOPO, "gpu-a02 mlx5_0", new))
        assert res.unchanged == 7 and res.updated == res.added == 0, new
        assert A02_0 in guids(store, "gpu-a02")
        assert [h["port_guid"] for h in report.pending] == ([A02_0] if " mlx5_" in new else []), new
    # --strict refuses a CA it cannot name only when the store does not know its ports either
    _, res = run(store, describe(TOPO, "gpu-a02 mlx5_0", "no-device-here"), strict=True)
    assert res.unchanged == 7
    unknown = describe(TOPO, "gpu-a02 mlx5_0", "no-device-here").replace("2c90310000201", "2c903100002f1")
    with pytest.raises(ValidationError) as e:
        run(store, unknown, strict=True)
    assert e.value.field == "ib_node_description"


def test_a_new_guid_joining_a_node_is_held_until_confirmed(store: Store) -> None:
    # gpu-a01's second HCA replaced: a GUID the store does not know, described as gpu-a01's
    swapped = TOPO.replace("2c90310000111", "2c903100001f1")
    report, res = run(store, swapped)
    new = "0x0002c903100001f1"
    (held,) = report.pending
    assert (held["change"], held["node"], held["confirm"]) == ("join", "gpu-a01", f"{new}=gpu-a01")
    assert new not in guids(store, "gpu-a01") and A01_1 in guids(store, "gpu-a01")  # the old one is kept
    assert any("not on the fabric, kept" in line for line in report.lines)
    for bad in ("0x0002c903100001f1", "zz=gpu-a01", f"{new}=Bad Name", f"{new}=gpu-a02"):
        with pytest.raises(ValidationError) as e:
            run(store, swapped, bad)
        assert e.value.field == "--confirm" and "\n" not in str(e.value), bad
    assert new not in guids(store, "gpu-a01")  # nothing written
    done, res = run(store, swapped, f"{new}=gpu-a01")
    assert done.pending == () and res.updated == 1 and new in guids(store, "gpu-a01")
    assert A01_1 not in guids(store, "gpu-a01")  # the HCA it replaced, gone from the fabric


def test_a_description_moving_a_quarantined_nodes_port_applies_only_when_confirmed(store: Store) -> None:
    moved = describe(TOPO, "gpu-a01 mlx5_1", "gpu-a03 mlx5_7")
    report, _ = run(store, moved)
    assert [h["confirm"] for h in report.pending] == [f"{A01_1}=gpu-a03"]
    assert A01_1 in guids(store, "gpu-a01")
    run(store, moved, f"{A01_1}=gpu-a03")
    assert A01_1 in guids(store, "gpu-a03") and A01_1 not in guids(store, "gpu-a01")


def test_cabling_that_differs_from_the_stored_is_held(store: Store) -> None:
    # gpu-a01 mlx5_1 read on leaf-01 port 9 instead of port 2 (both ends of the link, as ibnetdiscover prints it)
    recabled = TOPO.replace('[2]\t"H-0002c90310000110"', '[9]\t"H-0002c90310000110"').replace(
        '"S-0002c90330000001"[2]', '"S-0002c90330000001"[9]'
    )
    assert recabled != TOPO
    stored = next(p for p in all_ib_ports(store.node("gpu-a01")) if str(p.port_guid) == A01_1)
    report, res = run(store, recabled)
    (held,) = report.pending
    assert held["change"] == "cabling" and "port 9" in str(held["reason"]) and res.updated == 0
    assert next(p for p in all_ib_ports(store.node("gpu-a01")) if str(p.port_guid) == A01_1) == stored
    run(store, recabled, f"{A01_1}=gpu-a01")
    assert next(p for p in all_ib_ports(store.node("gpu-a01")) if str(p.port_guid) == A01_1).switch_port == 9
