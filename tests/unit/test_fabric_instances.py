"""Fabric instances: ``fabrics.yaml``'s list of named instances of a kind (and today's
per-kind sections, migrated on load), and the in-memory kind owning its whole column through
the generic seams only (inventory section -> ``node_fabric_ports``, a segment per network,
its audit check, its API fragment and table cell), with two instances of it in one
deployment kept apart by moves and the audit. SQLite store in tmp; no root, no device."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.models import QUARANTINE, FabricPorts
from gpufabric.domain.moves import MoveRequest, MoveStatus
from gpufabric.engine.audit_run import audit
from gpufabric.engine.fabrics import Fabrics, configured_instances
from gpufabric.engine.moves import MoveEngine
from gpufabric.store.core import Store
from gpufabric.store.registry import Registry, parse_segments
from gpufabric.store.tables import NodeFabricPortsRow
from gpufabric.workflow.inventory import parse_inventory

from support.memfabric import DRIFT_ID_MEMORY, MemoryBackend, register
from support.memfabric.column import MemPort

CFG = parse_segments()
TWO = {"fabrics": [{"name": "mem-a", "kind": "memory", "driver": "mem-tags"},
                   {"name": "mem-b", "kind": "memory", "section": {"driver": "mem-tags", "options": {}}}]}  # fmt: skip
INVENTORY = """
version: 1
nodes:
  - name: n1
    fabrics:
      mem-a: [{name: m0, link: 1}, {name: m1, link: 2}]
      mem-b: [{name: x0, link: 1}]
  - name: n2
    fabrics:
      mem-a: [{name: m0, link: 3}]
  - name: n3
    fabrics:
      mem-b: [{name: x0, link: 2}]
"""


def registry(inventory: bool = True) -> Registry:
    reg = Registry()
    register(reg, inventory=inventory)
    return reg


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MoveEngine]:
    reg = registry()
    fabrics = Fabrics.from_config(TWO, reg)
    store = Store.open(url=f"sqlite:///{tmp_path / 'g.db'}")
    store.upsert_inventory(parse_inventory(INVENTORY, instances=configured_instances(TWO, reg)))
    store.create_tenant("ta")
    store.create_tenant("tb")
    store.create_network("ta-a", "ta", CFG, kinds=[fabrics.kinds["mem-a"]])  # a network on mem-a only
    store.create_network("tb-both", "tb", CFG, kinds=fabrics.kind_list())
    eng = MoveEngine(store, fabrics, CFG, worker="test:1", heartbeat_every=60)
    yield eng
    fabrics.close()
    store.close()


def backend(e: MoveEngine, instance: str) -> MemoryBackend:
    b = e.fabrics.backends[instance]
    assert isinstance(b, MemoryBackend)
    return b


def tags(e: MoveEngine, instance: str) -> dict[str, str]:
    return dict(backend(e, instance).observe().tags)


def move(e: MoveEngine, node: str, tenant: str, networks: tuple[str, ...]) -> None:
    e.ledger.request(node, MoveRequest(tenant, networks=networks))
    batch = e.run_pending()
    assert batch is not None and [m.status for m in batch.moves] == [MoveStatus.DONE]


# ------------------------------------------------------------------ configuration
def test_the_list_of_instances_builds_one_bound_kind_and_backend_each() -> None:
    f = Fabrics.from_config(TWO, registry())
    assert list(f.kinds) == list(f.backends) == ["mem-a", "mem-b"]
    assert [(k.name, k.instance) for k in f.kind_list()] == [("memory", "mem-a"), ("memory", "mem-b")]
    assert f.backends["mem-a"] is not f.backends["mem-b"] and f.notes == ()
    assert f.instances_of("memory") == ["mem-a", "mem-b"]


def test_todays_per_kind_section_is_migrated_to_one_instance_named_after_the_kind() -> None:
    f = Fabrics.from_config({"memory": {"driver": "mem-tags"}}, registry(inventory=False))
    assert list(f.kinds) == ["memory"] and f.kinds["memory"].instance == "memory"
    assert len(f.notes) == 1 and "top-level 'memory:' read as the instance memory of kind memory" in f.notes[0]


@pytest.mark.parametrize(
    ("raw", "field", "allowed"),
    [
        ({"fabrics": [{"name": "x", "kind": "nosuch"}]}, "fabrics[0].kind", "a registered fabric kind: memory"),
        ({"fabrics": [{"name": "Bad_Name", "kind": "memory", "driver": "mem-tags"}]}, "fabrics[0].name", "1-63 chars"),
        ({"fabrics": [{"name": "memory", "kind": "memory", "driver": "mem-tags"}], "memory": {"driver": "mem-tags"}},
         "fabrics.memory", "unique instance names (also at fabrics[0].name)"),
        ({"fabrics": {"mem-a": {}}}, "fabrics", "a list of {name, kind, ...section} instances"),
    ],
)  # fmt: skip
def test_bad_instances_are_refused_naming_the_field(raw: dict[str, Any], field: str, allowed: str) -> None:
    with pytest.raises(ConfigError) as e:
        Fabrics.from_config(raw, registry())
    assert e.value.field == field and allowed in e.value.allowed


# ------------------------------------------------------------------ the generic column
def test_inventory_section_is_parsed_by_its_kind_and_stored_in_the_generic_table(engine: MoveEngine) -> None:
    n1 = engine.store.node("n1")
    assert [p.instance for p in n1.fabric_ports] == ["mem-a", "mem-b"]
    assert engine.fabrics.kinds["mem-a"].ports(n1) == (MemPort("m0", 1), MemPort("m1", 2))
    assert engine.fabrics.kinds["mem-b"].ports(n1) == (MemPort("x0", 1),)
    assert engine.fabrics.kinds["mem-b"].ports(engine.store.node("n2")) == ()
    assert engine.store.nodes()[0] == n1  # the Core read path (store_nodes) agrees with the ORM one
    with engine.store._tx() as s:
        rows = sorted((r.instance, json.dumps(r.data)) for r in s.scalars(select(NodeFabricPortsRow)))
    assert len(rows) == 4 and rows[0][0] == "mem-a"
    again = parse_inventory(INVENTORY, instances=configured_instances(TWO, registry()))
    assert engine.store.upsert_inventory(again).unchanged == 3


@pytest.mark.parametrize(
    ("entry", "field", "allowed"),
    [
        ("mem-a: [{name: m0, link: 0}]", "nodes[0].fabrics.mem-a[0].link", "an integer 1-4096"),
        ("mem-a: [{name: M_0, link: 1}]", "nodes[0].fabrics.mem-a[0].name", "1-15 chars"),
        ("mem-c: [{name: m0, link: 1}]", "nodes[0].fabrics.mem-c", "a fabric instance with an inventory section: dpu, ethernet, infiniband, mem-a, mem-b, nvlink"),
        ("mem-a: [{name: m0, link: 5}]\n  - name: n2\n    fabrics:\n      mem-a: [{name: m0, link: 5}]",
         "nodes[1].fabrics.mem-a", "unique ports on fabric mem-a (also at nodes[0].fabrics.mem-a)"),
    ],
)  # fmt: skip
def test_bad_inventory_sections_are_refused_by_the_kind_naming_the_field(entry: str, field: str, allowed: str) -> None:
    text = f"version: 1\nnodes:\n  - name: n1\n    fabrics:\n      {entry}\n"
    with pytest.raises(ValidationError) as e:
        parse_inventory(text, instances=configured_instances(TWO, registry()))
    assert e.value.field == field and allowed in e.value.allowed


def test_a_generic_section_without_configured_instances_is_refused() -> None:
    """Only the registered kinds' default instances (``dpu``, ``nvlink``) are there unconfigured."""
    with pytest.raises(ValidationError) as e:
        parse_inventory("nodes: [{name: n1, fabrics: {mem-a: []}}]")
    assert e.value.field == "nodes[0].fabrics.mem-a" and e.value.allowed == "a fabric instance with an inventory section: dpu, ethernet, infiniband, nvlink"
    with pytest.raises(ValidationError) as e:
        parse_inventory("nodes: [{name: n1, fabrics: {mem-a: []}}]", kinds=())
    assert e.value.allowed == "a fabric instance with an inventory section: none configured"


# ------------------------------------------------------------------ two instances kept apart
def test_segments_exist_only_on_the_instances_a_network_was_given(engine: MoveEngine) -> None:
    assert [(s.fabric, s.seg_id) for s in engine.store.network("ta-a", "ta").segments] == [("mem-a", 1)]
    # a kind's instances share its pool (VLANs and PKeys are unique deployment-wide)
    assert [(s.fabric, s.seg_id) for s in engine.store.network("tb-both", "tb").segments] == [("mem-a", 2), ("mem-b", 3)]


def test_moves_keep_two_instances_of_one_kind_apart(engine: MoveEngine) -> None:
    move(engine, "n1", "ta", ("ta-a",))
    assert tags(engine, "mem-a") == {"n1/m0": "ta@1", "n1/m1": "ta@1", "n2/m0": QUARANTINE}
    assert tags(engine, "mem-b") == {"n1/x0": "ta", "n3/x0": QUARANTINE}  # ta-a has no segment on mem-b
    move(engine, "n1", "tb", ("tb-both",))
    assert tags(engine, "mem-a")["n1/m0"] == "tb@2" and tags(engine, "mem-b")["n1/x0"] == "tb@3"
    move(engine, "n3", "ta", ("ta-a",))
    assert tags(engine, "mem-b")["n3/x0"] == "ta" and "n3/x0" not in tags(engine, "mem-a")
    assert audit(engine).ok


def test_the_audit_names_the_instance_a_finding_is_on(engine: MoveEngine) -> None:
    move(engine, "n1", "ta", ("ta-a",))
    backend(engine, "mem-b").set_tag("n1/x0", "tb")  # drift on mem-b only
    report = audit(engine)
    drift = [v for v in report.violations if v.invariant == DRIFT_ID_MEMORY]
    assert [(v.fabric, v.port, v.tenants) for v in drift] == [("mem-b", "n1/x0", ("ta", "tb"))]
    assert sum(1 for i in report.checked if i == DRIFT_ID_MEMORY) == 1  # one invariant, however many instances


def test_node_views_and_summaries_are_keyed_by_instance(engine: MoveEngine) -> None:
    n1, n3 = engine.store.node("n1"), engine.store.node("n3")
    assert engine.fabrics.node_views(n1) == {"mem-a": {"ports": [{"name": "m0", "link": 1}, {"name": "m1", "link": 2}]},
                                             "mem-b": {"ports": [{"name": "x0", "link": 1}]}}  # fmt: skip
    assert engine.fabrics.node_views(n3) == {"mem-b": {"ports": [{"name": "x0", "link": 2}]}}
    assert engine.fabrics.summaries(n1) == {"mem-a": "m0:1 m1:2", "mem-b": "x0:1"}


def test_fabric_ports_json_is_canonical() -> None:
    assert FabricPorts.of("mem-a", [{"name": "m0", "link": 1}]).data == '[{"link":1,"name":"m0"}]'
