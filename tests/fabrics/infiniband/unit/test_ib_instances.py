"""Several InfiniBand subnets (issue 20, part 3), and the built-in kinds bound to instances: two instances of the built-in InfiniBand kind
(``ib-compute``, ``ib-storage``) in one deployment. A node's HCA ports belong to one instance
each (``IbPort.instance``), a network gets one segment per instance (the kind's pool is shared,
so its PKeys differ across instances), each instance's SM is handed only its own ports with
its own PKey, and the audit reads each subnet against its own segments.

In-memory SMs (tests/support/memfabric), SQLite store in tmp; no root, no device.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import QUARANTINE, Inventory, Lease, Network
from gpufabric.domain.moves import MoveRequest, MoveStatus
from gpufabric.domain.values import Guid, PKey, VlanId
from gpufabric.engine.audit_run import audit
from gpufabric.engine.fabrics import Fabrics, configured_instances, network_kinds
from gpufabric.engine.moves import MoveEngine
from gpufabric.fabrics.ethernet.entries import EthernetPort
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.ethernet.state import PortMode
from gpufabric.fabrics.infiniband.entries import IbPort, all_ib_ports
from gpufabric.fabrics.infiniband.inventory.claims import Seen, resolve
from gpufabric.fabrics.infiniband.inventory.match import import_instance, on_instance
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.fabrics.infiniband.plan import IbPlan, instance_ports
from gpufabric.fabrics.infiniband.segments import segment_pkey
from gpufabric.fabrics.infiniband.state import IbFabricState, PkeyTable
from gpufabric.store.core import Store
from gpufabric.store.registry import Registry, parse_segments
from gpufabric.store.tenants import adopt_network
from gpufabric.workflow.inventory import parse_inventory

from support import drivers
from support.memfabric import MemorySubnetManager, register
from support.ports import port_node
from support.segments import segment

CFG = parse_segments()
SM_C, SM_S = Guid(0x0002C90300FF0001), Guid(0x0002C90300FF0002)
NODES = ("n1", "n2")


def guid(n: int, port: int) -> Guid:
    return Guid(0x0002C90300000000 + n * 256 + port)


def inventory() -> Inventory:
    """Each node: mlx5_0, mlx5_1 on ib-compute and mlx5_8 on ib-storage."""
    nodes = []
    for i, name in enumerate(NODES, start=1):
        compute = tuple(IbPort(name, f"mlx5_{k}", 1, guid(i, k), guid(i, 128 + k), instance="ib-compute") for k in range(2))
        storage = IbPort(name, "mlx5_8", 1, guid(i, 8), guid(i, 136), instance="ib-storage")
        nodes.append(port_node(name, ib=(*compute, storage)))
    return Inventory(tuple(nodes))


def ports_of(instance: str) -> list[str]:
    return [str(p.port_guid) for n in inventory().nodes for p in all_ib_ports(n) if p.instance == instance]


def config() -> dict[str, Any]:
    return {
        "fabrics": [
            {"name": "ib-compute", "kind": "infiniband", "driver": "mem-sm",
             "options": {"ports": ports_of("ib-compute"), "trusted_sm_guids": [str(SM_C)]}},
            {"name": "ib-storage", "kind": "infiniband", "driver": "mem-sm",
             "options": {"ports": ports_of("ib-storage"), "trusted_sm_guids": [str(SM_S)]}},
        ],
        "sm_port_guids": [str(SM_C), str(SM_S)],  # trusted too (the top level's default); each subnet names its own
    }  # fmt: skip


def registry() -> Registry:
    reg = Registry.from_entry_points()
    register(reg)
    return reg


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MoveEngine]:
    reg = registry()
    fabrics = Fabrics.from_config(config(), reg)
    store = Store.open(url=f"sqlite:///{tmp_path / 'g.db'}")
    store.upsert_inventory(inventory())
    for t in ("ta", "tb"):
        store.create_tenant(t)
        store.create_network(f"{t}-net", t, CFG, kinds=network_kinds(config(), reg))
    eng = MoveEngine(store, fabrics, CFG, worker="test:1", heartbeat_every=60)
    yield eng
    fabrics.close()
    store.close()


def sm(e: MoveEngine, instance: str) -> MemorySubnetManager:
    d = e.fabrics.backends[instance].sm  # type: ignore[attr-defined]
    assert isinstance(d, MemorySubnetManager)
    return d


def pkeys(e: MoveEngine, instance: str) -> dict[Guid, frozenset[int]]:
    """port -> the tenant PKeys its table holds, read from the instance's SM now."""
    return {t.port_guid: frozenset(t.tenant_keys()) for t in sm(e, instance).observe().tables}


def move(e: MoveEngine, node: str, tenant: str) -> None:
    e.ledger.request(node, MoveRequest(tenant, networks=(f"{tenant}-net",) if tenant != QUARANTINE else ()))
    batch = e.run_pending()
    assert batch is not None
    assert [m.status for m in batch.moves] == [MoveStatus.DONE]


def test_a_network_gets_one_segment_per_ib_instance_with_pkeys_disjoint_across_them(engine: MoveEngine) -> None:
    ta, tb = engine.store.network("ta-net", "ta"), engine.store.network("tb-net", "tb")
    by = {n.tenant: {s.fabric: s for s in n.segments if segment_pkey(s) is not None} for n in (ta, tb)}
    assert set(by["ta"]) == set(by["tb"]) == {"ib-compute", "ib-storage"}  # no segment on a default 'infiniband'
    every = [segment_pkey(s).value for segs in by.values() for s in segs.values() if segment_pkey(s) is not None]
    assert len(set(every)) == 4  # the kind's pool is shared: no PKey on two instances, nor two tenants
    assert len({s.seg_id for segs in by.values() for s in segs.values()}) == 4
    assert {s.fabric for s in ta.segments} >= {"ethernet"}  # kinds without an instance keep their default one


def test_the_store_keeps_each_ib_port_on_its_instance(engine: MoveEngine) -> None:
    n1 = engine.store.node("n1")
    assert [(p.device, p.instance) for p in all_ib_ports(n1)] == [("mlx5_0", "ib-compute"), ("mlx5_1", "ib-compute"), ("mlx5_8", "ib-storage")]
    assert {p.instance for n in engine.store.nodes() for p in all_ib_ports(n)} == {"ib-compute", "ib-storage"}


def test_a_move_programs_each_subnet_with_the_tenants_own_pkey_there(engine: MoveEngine) -> None:
    move(engine, "n1", "ta")
    ta = {s.fabric: segment_pkey(s).value & 0x7FFF for s in engine.store.network("ta-net", "ta").segments if segment_pkey(s)}
    compute, storage = pkeys(engine, "ib-compute"), pkeys(engine, "ib-storage")
    assert compute[guid(1, 0)] == compute[guid(1, 1)] == {ta["ib-compute"]}
    assert storage[guid(1, 8)] == {ta["ib-storage"]}
    assert guid(1, 8) not in compute and guid(1, 0) not in storage  # each SM is handed its own subnet's ports only
    assert compute[guid(2, 0)] == storage[guid(2, 8)] == frozenset()  # n2 stays in quarantine on both
    assert audit(engine).violations == ()
    move(engine, "n1", "tb")
    tb = {s.fabric: segment_pkey(s).value & 0x7FFF for s in engine.store.network("tb-net", "tb").segments if segment_pkey(s)}
    assert pkeys(engine, "ib-compute")[guid(1, 0)] == {tb["ib-compute"]}
    assert pkeys(engine, "ib-storage")[guid(1, 8)] == {tb["ib-storage"]}
    assert audit(engine).violations == ()


def test_the_audit_reads_each_subnet_against_its_own_segments(engine: MoveEngine) -> None:
    move(engine, "n1", "ta")
    ta_compute = next(segment_pkey(s) for s in engine.store.network("ta-net", "ta").segments if s.fabric == "ib-compute")
    assert ta_compute is not None
    sm(engine, "ib-storage").set_table(guid(2, 8), (0x7FFF, ta_compute.value | 0x8000))  # n2 (quarantine) on storage
    found = [(v.invariant, v.fabric, v.node) for v in audit(engine).violations if v.invariant == "IB-GUID-FOREIGN-PKEY"]
    assert found == [("IB-GUID-FOREIGN-PKEY", "ib-storage", "n2")]  # on storage, not compute; ta's PKey is not its there


def test_the_pure_kind_sees_only_its_instances_ports_and_segment() -> None:
    node = inventory().nodes[0]
    net = Network("n", "t", (segment("ib-compute", 3000, pkey=PKey(0x0A00)), segment("ib-storage", 3001, pkey=PKey(0x0A01))))
    lease = Lease("t", "n1", datetime.now(UTC), networks=("n",))
    tenancy = Tenancy((node,), {"n1": lease}, {("t", "n"): net})
    for name, pkey, ports in (("ib-compute", 0x0A00, {guid(1, 0), guid(1, 1)}), ("ib-storage", 0x0A01, {guid(1, 8)})):
        layout = InfinibandKind().bind(name).desired(tenancy).layout
        assert [(p.pkey.value & 0x7FFF, {m.guid for m in p.members}) for p in layout.partitions] == [(pkey, ports)]
    assert InfinibandKind().desired(tenancy).layout.partitions == ()  # the default instance: no port, no segment here
    assert [p.device for p in instance_ports(node, "ib-storage")] == ["mlx5_8"]


def test_an_unnamed_port_is_on_the_default_instance() -> None:
    p = IbPort("n1", "mlx5_0", 1, guid(1, 0), guid(1, 128))
    assert instance_ports(port_node("n1", ib=(p,))) == (p,)
    assert instance_ports(port_node("n1", ib=(p,)), "ib-compute") == ()


def test_an_import_onto_the_default_instance_stores_ports_as_before_instances() -> None:
    """Re-importing an unchanged one-subnet fabric changes no port (a leased node's import would
    otherwise be refused as a port change: e2e test_hostile_inputs_refused_and_nothing_written)."""
    p = IbPort("n1", "mlx5_0", 1, guid(1, 0), guid(1, 128))
    assert on_instance(p, "infiniband") == p and on_instance(p, "infiniband").instance == ""
    assert on_instance(p, "ib-storage").instance == "ib-storage"


@pytest.mark.parametrize(
    ("storage", "field"),
    [
        ({"partitions_conf": "/etc/opensm/../opensm/partitions.conf", "log_path": "/var/log/b"},
         "fabrics.ib-storage.options.partitions_conf"),
        ({"sm_hosts": [{"host": "sm-a", "partitions_conf": "/etc/opensm/p.conf"}]},
         "fabrics.ib-storage.options.sm_hosts[0].partitions_conf"),
    ],
)  # fmt: skip
def test_two_instances_writing_one_sms_partitions_file_are_refused(storage: dict[str, Any], field: str) -> None:
    compute = {"partitions_conf": "/etc/opensm/partitions.conf", "log_path": "/var/log/a",
               "sm_hosts": [{"host": "sm-a", "port": 22, "partitions_conf": "/etc/opensm/p.conf"}]}  # fmt: skip
    raw = {"fabrics": [{"name": "ib-compute", "kind": "infiniband", "driver": "opensm", "options": compute},
                       {"name": "ib-storage", "kind": "infiniband", "driver": "opensm", "options": storage}],
           "trusted_sm_guids": [str(SM_C)]}  # fmt: skip
    with pytest.raises(ConfigError) as e:
        Fabrics.from_config(raw, registry())
    assert e.value.field == field
    assert "fabrics.ib-compute.options" in str(e.value) and "twice on one SM" in str(e.value)
    assert len(str(e.value).splitlines()) == 1


def test_instances_with_sms_of_their_own_pass_the_check() -> None:
    kind = InfinibandKind()
    kind.check_instances({"a": {"options": {"partitions_conf": "/a/p.conf"}}, "b": {"options": {"partitions_conf": "/b/p.conf"}},
                          "c": {"options": {"sm_hosts": [{"host": "sm-c", "partitions_conf": "/a/p.conf"}]}}})  # fmt: skip


# ---- each subnet has its own SM (issue 20, part 3: Fabrics.sms / sm_for)


def test_each_ib_instance_has_its_own_sm_driver(engine: MoveEngine) -> None:
    sms = drivers.sms(engine.fabrics)
    assert list(sms) == ["ib-compute", "ib-storage"]
    assert sms["ib-compute"] is not sms["ib-storage"]
    assert drivers.sm_for(engine.fabrics, "ib-storage") is sm(engine, "ib-storage")
    assert drivers.sm(engine.fabrics) is sms["ib-compute"]  # one-subnet callers: the first


def test_a_subnets_own_trusted_sms_narrow_the_top_level_list() -> None:
    raw = config()
    f = Fabrics.from_config(raw, registry())
    assert drivers.sms(f)["ib-storage"].trusted_sm_guids == (SM_S,)  # type: ignore[attr-defined]
    assert f.backends["ib-storage"].trusted_sm_guids == (SM_S,)  # type: ignore[attr-defined]
    del raw["fabrics"][0]["options"]["trusted_sm_guids"]  # not narrowed: the deployment's list
    assert drivers.sms(Fabrics.from_config(raw, registry()))["ib-compute"].trusted_sm_guids == (SM_C, SM_S)  # type: ignore[attr-defined]
    raw["fabrics"][1]["options"]["trusted_sm_guids"] = ["0x0002c903000000ff"]
    with pytest.raises(ConfigError) as e:
        Fabrics.from_config(raw, registry())
    assert e.value.field == "fabrics.ib-storage.options.trusted_sm_guids"
    assert str(SM_C) in str(e.value) and len(str(e.value).splitlines()) == 1


def test_another_subnets_sm_port_is_not_put_in_this_subnets_layout(engine: MoveEngine) -> None:
    """The SM port GUIDs are deployment-wide: a subnet's plan keeps only those on it (OpenSM's
    driver refuses a layout naming a GUID that is not on its fabric)."""
    move(engine, "n1", "ta")
    for name, own, other in (("ib-compute", SM_C, SM_S), ("ib-storage", SM_S, SM_C)):
        kind = engine.fabrics.kinds[name]
        sm(engine, name).set_table(guid(1, 8) if name == "ib-storage" else guid(1, 0), (0x7FFF,))  # drift to repair
        plan = kind.diff(kind.desired(engine.desired().tenancy), sm(engine, name).observe())
        assert isinstance(plan, IbPlan) and plan.layout is not None
        assert own in plan.layout.default_full and other not in plan.layout.default_full


# ---- inventory: HCA ports per instance (issue 20, part 3)


def test_an_ibnetdiscover_import_names_a_configured_ib_instance() -> None:
    two = configured_instances(config(), registry())
    assert import_instance("ib-storage", two) == "ib-storage"
    for bad, why in ((None, "one of the InfiniBand instances"), ("ib-nope", "an InfiniBand instance"), ("memory", "an InfiniBand")):
        with pytest.raises(ValidationError) as e:
            import_instance(bad, two)
        assert e.value.field == "--fabric" and why in str(e.value) and "ib-compute, ib-storage" in str(e.value)
    assert import_instance(None, {"ib-compute": two["ib-compute"]}) == "ib-compute"  # the only one
    assert import_instance(None, {}) == "infiniband"  # no fabrics.yaml: the default instance


def test_importing_one_subnet_keeps_the_nodes_ports_on_the_others() -> None:
    known = [inventory().nodes[0]]
    seen = (Seen(guid(1, 8), guid(1, 136), 1, None, None, "n1 mlx5_8", "n1", "mlx5_8"),)
    out = resolve(seen, known, "ib-storage")
    assert [(p.device, p.instance) for p in all_ib_ports(out.nodes[0])] == [("mlx5_0", "ib-compute"), ("mlx5_1", "ib-compute"), ("mlx5_8", "ib-storage")]
    assert out.held == () and out.missing == ()
    # the same port in an import of ib-compute: it is stored on ib-storage (held), and the
    # node's ib-compute ports the import does not show are kept
    other = resolve(seen, known, "ib-compute")
    assert [h.change for h in other.held] == ["cabling"] and "instance ib-storage" in other.held[0].reason
    assert {p.device for p in other.missing} == {"mlx5_0", "mlx5_1"} and other.nodes[0] == known[0]


def test_an_inventory_file_names_a_ports_instance() -> None:
    text = """version: 1
nodes:
  - name: n1
    ib:
      - {device: mlx5_0, port_guid: "0x0002c90300000101", node_guid: "0x0002c90300000100"}
      - {device: mlx5_8, port_guid: "0x0002c90300000181", node_guid: "0x0002c90300000180", instance: ib-storage}
"""
    node = parse_inventory(text).nodes[0]
    assert [(p.device, p.instance) for p in all_ib_ports(node)] == [("mlx5_0", ""), ("mlx5_8", "ib-storage")]
    with pytest.raises(ValidationError) as e:
        parse_inventory(text.replace("instance: ib-storage", "instance: 'Bad Name'"))
    assert e.value.field == "nodes[0].ib[1].instance"


def test_the_ethernet_kind_reads_its_instances_segment() -> None:
    """The built-in Ethernet kind, bound to an instance, carries the network's VLAN on that
    instance (not the default instance's), allocates under its instance name and audits it."""
    node = port_node("n1", ethernet=(EthernetPort("n1", "eth0", "leaf1", "p1"),))
    net = Network("n", "t", (segment("ethernet", 2000, vlan=VlanId(2000)), segment("eth-b", 2001, vlan=VlanId(2001))))
    tenancy = Tenancy((node,), {"n1": Lease("t", "n1", datetime.now(UTC), networks=("n",))}, {("t", "n"): net},
                      settings={"quarantine_vlan": 4000})  # fmt: skip
    for kind, vlan in ((EthernetKind(), 2000), (EthernetKind().bind("eth-b"), 2001)):
        (sw,) = kind.desired(tenancy)
        assert [(p.port, p.mode, p.vlan) for p in sw.ports] == [("p1", PortMode.ACCESS, VlanId(vlan))]
        assert list(kind.audit(tenancy, kind.desired(tenancy), kind.desired(tenancy))) == []
    seg = EthernetKind().bind("eth-b").allocate(net, [], CFG)
    assert seg is not None and seg.fabric == "eth-b"


def test_a_network_on_one_subnet_leaves_the_nodes_other_subnets_ports_in_no_tenants_partition(
    engine: MoveEngine,
) -> None:
    """``network create --fabric ib-compute``: n1 (HCAs on both subnets) moves from tb (tb-net on
    both) to ta on ta's compute-only network: its storage HCA leaves tb's storage partition and
    joins none (the default partition only), and the audit finds nothing to report."""
    only_compute = adopt_network(
        engine.store, "ta-compute", "ta", CFG, {}, network_kinds(config(), registry()), ["ib-compute"]
    )
    assert [s.fabric for s in only_compute.segments] == ["ib-compute"]
    tb_storage = next(segment_pkey(s) for s in engine.store.network("tb-net", "tb").segments if s.fabric == "ib-storage")
    assert tb_storage is not None
    move(engine, "n1", "tb")
    assert pkeys(engine, "ib-storage")[guid(1, 8)] == {tb_storage.value & 0x7FFF}
    engine.ledger.request("n1", MoveRequest("ta", networks=("ta-compute",)))
    batch = engine.run_pending()
    assert batch is not None and [m.status for m in batch.moves] == [MoveStatus.DONE]
    ta_compute = segment_pkey(only_compute.segments[0])
    assert ta_compute is not None
    compute = pkeys(engine, "ib-compute")
    assert compute[guid(1, 0)] == compute[guid(1, 1)] == {ta_compute.value & 0x7FFF}
    storage = sm(engine, "ib-storage").observe().table(guid(1, 8))
    assert storage is not None and storage.tenant_keys() == frozenset()  # neither tb's old PKey nor any of ta's
    assert audit(engine).violations == ()


def test_desired_and_audit_of_a_subnet_the_leased_network_does_not_span() -> None:
    """Pure: on ib-storage, n1 leased on a compute-only network is managed (its port is in the
    desired slice) but in no partition; its table holding the default partition only passes the
    audit, and the old tenant's PKey left on it is found."""
    node = inventory().nodes[0]
    ta = Network("ta-compute", "ta", (segment("ib-compute", 3000, pkey=PKey(0x0A00)),))
    tb = Network(
        "tb-net", "tb", (segment("ib-compute", 3001, pkey=PKey(0x0A01)), segment("ib-storage", 3002, pkey=PKey(0x0A02)))
    )
    tenancy = Tenancy((node,), {"n1": Lease("ta", "n1", datetime.now(UTC), networks=("ta-compute",))},
                      {("ta", "ta-compute"): ta, ("tb", "tb-net"): tb})  # fmt: skip
    storage = InfinibandKind().bind("ib-storage")
    desired = storage.desired(tenancy)
    assert desired.layout.partitions == () and guid(1, 8) in desired.guids
    clean = storage.as_observed(desired)
    assert [t.entries for t in clean.tables if t.port_guid == guid(1, 8)] == [(0x7FFF,)]
    assert list(storage.audit(tenancy, desired, clean)) == []
    assert storage.tenants_seen(clean, tenancy) == {"n1": frozenset({QUARANTINE})}
    stale = IbFabricState(tables=tuple(
        PkeyTable(t.port_guid, (0x7FFF, 0x8A02) if t.port_guid == guid(1, 8) else t.entries) for t in clean.tables
    ))  # fmt: skip
    found = {(v.invariant, v.node) for v in storage.audit(tenancy, desired, stale)}
    assert ("IB-GUID-FOREIGN-PKEY", "n1") in found
    assert storage.diff(desired, stale).lines() == [f"infiniband pkey 0x0a02: remove full member {guid(1, 8)}"]
    compute = InfinibandKind().bind("ib-compute")
    assert [(p.pkey.value & 0x7FFF) for p in compute.desired(tenancy).layout.partitions] == [0x0A00]
