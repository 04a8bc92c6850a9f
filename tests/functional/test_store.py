"""The store on real SQLite and real PostgreSQL (started by tests/conftest.py)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, text

from gpufabric.domain.errors import ConflictError, ExhaustedError, NotFoundError, ValidationError
from gpufabric.domain.models import BUILTIN_OFFERINGS, Inventory, Lease, Node, NodeState, Offering
from gpufabric.domain.values import Guid, ModuleId, PKey, VlanId
from gpufabric.fabrics.dpu.entries import Dpu, DpuMode, dpu_ports
from gpufabric.fabrics.dpu.entries.info import node_dpus
from gpufabric.fabrics.dpu.plan.profiles import offering_mode
from gpufabric.fabrics.ethernet.entries import EthernetPort, ethernet_ports
from gpufabric.fabrics.ethernet.segments import segment_vlan
from gpufabric.fabrics.infiniband.entries import IbPort, all_ib_ports
from gpufabric.fabrics.infiniband.segments import segment_pkey
from gpufabric.fabrics.nvlink.entries import Gpu, gpu_ports
from gpufabric.store import db
from gpufabric.store.core import ImportResult, Store
from gpufabric.store.registry import parse_segments
from gpufabric.store.tables import Base

from support.ports import port_node, replace_ports

T0 = datetime(2030, 1, 1, tzinfo=UTC)
H = timedelta(hours=1)


def node(i: int, *, nics: int = 2, hcas: int = 2, switch: str = "leaf1") -> Node:
    name = f"gpu{i:02d}"
    return port_node(
        name,
        offering="baremetal",
        ethernet=tuple(
            EthernetPort(name, f"eth{k}", switch, f"Ethernet{i * 10 + k}", f"52:54:00:00:{i:02x}:{k:02x}")
            for k in range(nics)
        ),
        ib=tuple(
            IbPort(name, f"mlx5_{k}", 1, Guid(0x0002C90300000000 + i * 16 + k), Guid(0x0002C90300100000 + i * 16 + k))
            for k in range(hcas)
        ),
        fabric_ports=(
            *(dpu_ports(Dpu(name, "bf3", DpuMode.DPU_HOST)) if i == 1 else ()),
            *gpu_ports(*(Gpu(name, ModuleId(m), f"0000:{m:02x}:00.0") for m in range(1, 3))),
        ),
    )


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = Store.open(store_url)
    yield s
    s.close()


def test_open_migrates_seeds_offerings_and_reopens(store: Store) -> None:
    assert [o.name for o in store.offerings()] == ["baremetal", "openshift", "openstack", "vm-host"]
    assert offering_mode(store.offerings()[1]) is DpuMode.DPU_HOST  # the DPU kind reads the built-in openshift as dpu-host
    again = Store.open(store.url)  # second open: migration and seeding are idempotent
    try:
        assert len(again.offerings()) == len(BUILTIN_OFFERINGS)
    finally:
        again.close()
    engine = create_engine(store.url)
    try:
        with engine.connect() as c:
            assert c.execute(text("SELECT version_num FROM alembic_version")).scalar() == db.head_revision()
            # the migrations create exactly what the ORM models describe
            diff = compare_metadata(MigrationContext.configure(c), Base.metadata)
        assert diff == []
    finally:
        engine.dispose()


def test_open_uses_env_and_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUFABRIC_DB", raising=False)
    monkeypatch.setenv("GPUFABRIC_HOME", str(tmp_path / "h1"))
    with Store.open() as s:
        assert s.url == f"sqlite:///{tmp_path}/h1/gpufabric.db"
    with Store.open(home=tmp_path / "h2") as s:
        assert s.url == f"sqlite:///{tmp_path}/h2/gpufabric.db"
    monkeypatch.setenv("GPUFABRIC_DB", f"sqlite:///{tmp_path}/env.db")
    with Store.open(home=tmp_path / "h2") as s:
        assert s.url == f"sqlite:///{tmp_path}/env.db"
    assert (tmp_path / "env.db").exists()


# ---------------------------------------------------------------------- inventory
def test_upsert_inventory_is_idempotent_and_round_trips(store: Store) -> None:
    inv = Inventory((node(1), node(2)))
    assert store.upsert_inventory(inv) == ImportResult(added=2)
    again = store.upsert_inventory(inv)
    assert again == ImportResult(unchanged=2) and str(again) == "0 added, 0 updated, 2 unchanged"  # no repr for people
    got = store.node("gpu01")
    assert got == node(1)
    assert all_ib_ports(got)[1].port_guid == Guid(0x0002C90300000011)
    assert node_dpus(got) == (Dpu("gpu01", "bf3", DpuMode.DPU_HOST),)
    assert [n.name for n in store.nodes()] == ["gpu01", "gpu02"]


def test_upsert_updates_ports_and_keeps_state(store: Store) -> None:
    store.upsert_inventory(Inventory((node(1), node(2))))
    store.set_node_state("gpu02", NodeState.MAINTENANCE)
    changed = dataclasses.replace(node(2, nics=1, hcas=3), offering="openstack")
    assert store.upsert_inventory(Inventory((node(1), changed, node(3)))) == ImportResult(1, 1, 1)
    got = store.node("gpu02")
    assert got.state is NodeState.MAINTENANCE
    assert got.offering == "openstack"
    assert [p.name for p in ethernet_ports(got)] == ["eth0"]
    assert [p.device for p in all_ib_ports(got)] == ["mlx5_0", "mlx5_1", "mlx5_2"]


def test_port_moving_between_nodes_in_one_import_is_not_a_conflict(store: Store) -> None:
    store.upsert_inventory(Inventory((node(1), node(2))))
    a, b = node(1), node(2)
    swapped = (replace_ports(a, ethernet=(dataclasses.replace(ethernet_ports(b)[0], node="gpu01"),)),
               replace_ports(b, ethernet=(dataclasses.replace(ethernet_ports(a)[0], node="gpu02"),)))  # fmt: skip
    assert store.upsert_inventory(Inventory(swapped)) == ImportResult(updated=2)
    assert ethernet_ports(store.node("gpu01"))[0].switch_port == "Ethernet20"


@pytest.mark.parametrize(
    ("what", "match"),
    [
        ("switch_port", r"switch port leaf1/Ethernet10 .*already belongs to node gpu01"),
        ("port_guid", r"port GUID 0x0002c90300000010 .*already belongs to node gpu01"),
    ],
    ids=["same-switch-port", "same-port-guid"],
)
def test_conflicting_port_writes_nothing(store: Store, what: str, match: str) -> None:
    store.upsert_inventory(Inventory((node(1),)))
    thief = node(9)
    if what == "switch_port":
        thief = replace_ports(thief, ethernet=(dataclasses.replace(ethernet_ports(node(1))[0], node="gpu09"),))
    else:
        thief = replace_ports(thief, ib=(dataclasses.replace(all_ib_ports(node(1))[0], node="gpu09"),))
    with pytest.raises(ConflictError, match=match):
        store.upsert_inventory(Inventory((node(5), thief)))
    assert [n.name for n in store.nodes()] == ["gpu01"]  # gpu05 (valid) was not written either
    assert store.node("gpu01") == node(1)


def test_unknown_node(store: Store) -> None:
    with pytest.raises(NotFoundError, match="node not found: nope"):
        store.node("nope")
    with pytest.raises(NotFoundError):
        store.set_node_state("nope", NodeState.LEASED)


# ---------------------------------------------------------------------- tenants, networks
def test_tenants(store: Store) -> None:
    store.create_tenant("bravo")
    store.create_tenant("alpha")
    assert [t.name for t in store.tenants()] == ["alpha", "bravo"]
    with pytest.raises(ConflictError, match="tenant already exists: alpha"):
        store.create_tenant("alpha")
    with pytest.raises(ValidationError, match="quarantine"):
        store.create_tenant("quarantine")


def test_networks_get_disjoint_vlans_and_mapped_pkeys(store: Store) -> None:
    cfg = parse_segments({"infiniband": {"seg_range": "3000-3999", "mapping": {"base": "0x0b00"}}})
    store.create_tenant("alpha")
    store.create_tenant("bravo")
    a1 = store.create_network("a-net1", "alpha", cfg)
    b1 = store.create_network("b-net1", "bravo", cfg)
    a2 = store.create_network("a-net2", "alpha", cfg)
    eth = [n.segment("ethernet") for n in (a1, b1, a2)]
    ib = [n.segment("infiniband") for n in (a1, b1, a2)]
    assert [segment_vlan(s) for s in eth if s] == [VlanId(2000), VlanId(2001), VlanId(2002)]
    assert [s.seg_id for s in ib if s] == [3000, 3001, 3002]
    assert [segment_pkey(s) for s in ib if s] == [PKey(0x0B00), PKey(0x0B01), PKey(0x0B02)]
    assert [n.name for n in store.networks("alpha")] == ["a-net1", "a-net2"]
    assert store.network("b-net1", "bravo") == b1
    with pytest.raises(NotFoundError, match="network not found: alpha/b-net1"):
        store.network("b-net1", "alpha")  # names are per tenant: alpha has no b-net1
    with pytest.raises(ConflictError, match="network already exists in tenant alpha: a-net1"):
        store.create_network("a-net1", "alpha", cfg)
    same_name = store.create_network("a-net1", "bravo", cfg)  # another tenant may use the same name
    store.delete_network("a-net1", "bravo")
    assert same_name.tenant == "bravo"
    with pytest.raises(NotFoundError, match="tenant not found: charlie"):
        store.create_network("c-net", "charlie", cfg)
    store.delete_network("b-net1", "bravo")
    again = store.create_network("b-net2", "bravo", cfg)  # the lowest free ids are reused
    assert again.segment("ethernet") == b1.segment("ethernet")
    assert again.segment("infiniband") == b1.segment("infiniband")


def test_table_mapping_and_pkey_already_taken(store: Store) -> None:
    offset = parse_segments({"infiniband": {"mapping": {"base": "0x0a00"}}})
    table = parse_segments({"infiniband": {"mapping": {"mode": "table", "table": {3005: "0x0a00", 3006: "0x0a10"}}}})  # fmt: skip
    store.create_tenant("alpha")
    store.create_network("n1", "alpha", offset)  # seg 3000 -> 0x0a00
    n2 = store.create_network("n2", "alpha", table)  # 3005 would map to the taken 0x0a00: skipped
    seg = n2.segment("infiniband")
    assert seg is not None and (seg.seg_id, segment_pkey(seg)) == (3006, PKey(0x0A10))


@pytest.mark.parametrize("pool", ["ethernet", "infiniband"])
def test_pool_exhaustion_writes_nothing(store: Store, pool: str) -> None:
    raw = (
        {"ethernet": {"vlan_range": "2000-2001"}} if pool == "ethernet" else {"infiniband": {"seg_range": "3000-3001"}}
    )
    cfg = parse_segments(raw)
    store.create_tenant("alpha")
    store.create_network("n1", "alpha", cfg)
    store.create_network("n2", "alpha", cfg)
    field = "ethernet.vlan_range" if pool == "ethernet" else "infiniband.seg_range"
    with pytest.raises(ExhaustedError, match=f"no free value left in {field}"):
        store.create_network("n3", "alpha", cfg)
    assert [n.name for n in store.networks()] == ["n1", "n2"]


# ---------------------------------------------------------------------- leases
@pytest.fixture
def leasable(store: Store) -> Store:
    store.upsert_inventory(Inventory((node(1), node(2))))
    store.create_tenant("alpha")
    store.create_tenant("bravo")
    cfg = parse_segments()
    store.create_network("a-net", "alpha", cfg)
    store.create_network("b-net", "bravo", cfg)
    return store


def test_lease_round_trip_and_active_at(leasable: Store) -> None:
    s = leasable
    l1 = s.create_lease(Lease("alpha", "gpu01", T0, T0 + 2 * H, networks=("a-net",), offering="openshift", owner="ops"))
    l2 = s.create_lease(Lease("bravo", "gpu01", T0 + 2 * H, None, networks=("b-net",)))  # back-to-back is fine
    assert l1.id is not None and l2.id is not None and l1.id != l2.id
    assert l1 == Lease("alpha", "gpu01", T0, T0 + 2 * H, ("a-net",), "openshift", "ops", l1.id)
    assert s.lease(l1.id).start == T0 and s.lease(l1.id).start.tzinfo is not None
    assert s.leases() == [l1, l2]
    assert s.leases(active_at=T0 + H) == [l1]
    assert s.leases(active_at=T0 + 2 * H) == [l2]
    assert s.leases(active_at=T0 - H) == []
    # another time zone, same instant
    cet = datetime(2030, 1, 1, 2, 0, tzinfo=timezone(timedelta(hours=1)))
    assert s.leases(active_at=cet) == [l1]


@pytest.mark.parametrize(
    ("first_end", "start", "end"),
    [
        (T0 + 2 * H, T0 + H, T0 + 3 * H),
        (T0 + 2 * H, T0 - H, T0 + H),
        (T0 + 2 * H, T0 - H, None),
        (None, T0 + 30 * H, T0 + 31 * H),
    ],
    ids=["inside", "overlapping-start", "open-ended-before", "after-open-ended"],
)
def test_overlapping_lease_conflicts(
    leasable: Store, first_end: datetime | None, start: datetime, end: datetime | None
) -> None:
    first = leasable.create_lease(Lease("alpha", "gpu01", T0, first_end))
    with pytest.raises(ConflictError, match=f"node gpu01 already has lease {first.id} "):
        leasable.create_lease(Lease("bravo", "gpu01", start, end))
    assert leasable.leases() == [first]
    assert leasable.create_lease(Lease("bravo", "gpu02", start, end)).node == "gpu02"  # other node: fine


def test_lease_rules(leasable: Store) -> None:
    s = leasable
    with pytest.raises(NotFoundError, match="network not found: alpha/b-net"):
        s.create_lease(Lease("alpha", "gpu01", T0, networks=("a-net", "b-net")))
    with pytest.raises(NotFoundError, match="network not found: alpha/zz"):
        s.create_lease(Lease("alpha", "gpu01", T0, networks=("zz",)))
    with pytest.raises(NotFoundError, match="offering not found: gold"):
        s.create_lease(Lease("alpha", "gpu01", T0, offering="gold"))
    with pytest.raises(NotFoundError, match="node not found: gpu07"):
        s.create_lease(Lease("alpha", "gpu07", T0))
    with pytest.raises(ValidationError, match="lease.start"):
        s.create_lease(Lease("alpha", "gpu01", datetime(2030, 1, 1)))
    assert s.leases() == []
    s.create_offering(Offering("gold", "premium", (("dpu_mode", "dpu"), ("k", "v"))))
    lease = s.create_lease(Lease("alpha", "gpu01", T0, offering="gold", networks=("a-net",)))
    with pytest.raises(ConflictError, match="network a-net of tenant alpha is used by lease"):
        s.delete_network("a-net", "alpha")
    assert s.delete_lease(lease.id or 0) == lease
    assert s.leases() == []
    with pytest.raises(NotFoundError, match=f"lease not found: {lease.id}"):
        s.delete_lease(lease.id or 0)
    assert s.delete_network("a-net", "alpha").name == "a-net"
    assert [o for o in s.offerings() if o.name == "gold"] == [Offering("gold", "premium", (("dpu_mode", "dpu"), ("k", "v")))]
    with pytest.raises(ConflictError, match="offering already exists: gold"):
        s.create_offering(Offering("gold"))


# ---------------------------------------------------------------------- concurrency
def test_concurrent_network_creation_never_shares_a_vlan(store_url: str) -> None:
    """Two replicas (two Store objects, one thread each) allocate at the same time: on
    PostgreSQL the loser of a race hits the unique constraint and retries; SQLite
    serialises writers with BEGIN IMMEDIATE."""
    setup = Store.open(store_url)
    setup.create_tenant("alpha")
    cfg = parse_segments()
    per_thread = 15
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def replica(tag: str) -> None:
        s = Store.open(store_url)
        try:
            barrier.wait()
            for i in range(per_thread):
                s.create_network(f"{tag}-{i}", "alpha", cfg)
        except BaseException as e:
            errors.append(e)
        finally:
            s.close()

    threads = [threading.Thread(target=replica, args=(t,)) for t in ("r1", "r2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    nets = setup.networks()
    setup.close()
    vlans = [segment_vlan(n.segment("ethernet")) for n in nets]  # type: ignore[union-attr]
    pkeys = [segment_pkey(n.segment("infiniband")) for n in nets]  # type: ignore[union-attr]
    assert len(nets) == 2 * per_thread
    assert sorted(v.value for v in vlans if v) == list(range(2000, 2000 + 2 * per_thread))
    assert len(set(pkeys)) == 2 * per_thread
