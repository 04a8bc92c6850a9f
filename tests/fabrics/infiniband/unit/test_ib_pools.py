"""Per-subnet segment pools and the instances a network spans (issue 20, part 3).

An InfiniBand instance's ``fabrics.yaml`` section may carry ``segments: {seg_range, mapping}``
(config.yaml's ``segments.infiniband`` grammar): it then allocates and adopts only from it;
pools are checked at load against each other, the shared global pool and the VLAN pools. A
network names the instances it spans (``fabrics``, CLI ``--fabric``; default all).

SQLite store in tmp; no root, no device.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpufabric.cli.main import app
from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.errors import ConfigError, ConflictError, ExhaustedError, ValidationError
from gpufabric.domain.models import Network
from gpufabric.domain.segments import SegmentConfig
from gpufabric.domain.site_check import SiteContext
from gpufabric.domain.values import Guid
from gpufabric.engine.fabrics import Fabrics, network_kinds
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.fabrics.infiniband.segments import IbSegments, segment_pkey
from gpufabric.fabrics.infiniband.state.ipoib import IPOIB_PARTITION_LIMIT
from gpufabric.store.core import Store
from gpufabric.store.registry import Registry, parse_segments
from gpufabric.store.tenants import adopt_network
from gpufabric.workflow.actions import Actions

from support.memfabric import register
from support.segments import segment

CFG = parse_segments()  # ethernet 2000-2999, quarantine 4000; infiniband 3000-3999 -> 0x0a00 + (id - 3000)
COMPUTE = {"seg_range": "3000-3499", "mapping": {"mode": "offset", "base": "0x0a00"}}
STORAGE = {"seg_range": "3500-3999", "mapping": {"mode": "offset", "base": "0x0c00"}}


def fabrics_yaml(compute: Any = COMPUTE, storage: Any = STORAGE) -> dict[str, Any]:
    """Two IB instances, each with the pool given (None: none, the global pool)."""
    out = []
    for name, pool in (("ib-compute", compute), ("ib-storage", storage)):
        entry: dict[str, Any] = {"name": name, "kind": "infiniband", "driver": "opensm", "options": {}}
        if pool is not None:
            entry["segments"] = pool
        out.append(entry)
    return {"fabrics": out}


def kinds(raw: dict[str, Any] | None = None, cfg: SegmentConfig = CFG) -> list[Any]:
    return network_kinds(fabrics_yaml() if raw is None else raw, Registry.from_entry_points(), cfg)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(url=f"sqlite:///{tmp_path / 'g.db'}")
    s.create_tenant("ta")
    yield s
    s.close()


def ib(n: Network) -> dict[str, tuple[int, int]]:
    return {s.fabric: (s.seg_id, segment_pkey(s).value) for s in n.segments if segment_pkey(s) is not None}


def stored(store: Store) -> list[str]:
    return [n.name for n in store.networks("ta")]


# ---------------------------------------------------------------- allocation and adoption
def test_each_instance_allocates_from_its_own_pool(store: Store) -> None:
    made = [store.create_network(f"n{i}", "ta", CFG, kinds()) for i in range(3)]
    assert [ib(n) for n in made] == [
        {"ib-compute": (3000 + i, 0x0A00 + i), "ib-storage": (3500 + i, 0x0C00 + i)} for i in range(3)
    ]  # each pool's lowest free id: not 3000/3001 shared across the two as with one global pool


def test_an_own_pool_in_table_mode_maps_its_own_pkeys(store: Store) -> None:
    table = {"seg_range": "3500-3509", "mapping": {"mode": "table", "table": {3505: "0x1234", 3507: "0x1300"}}}
    k = kinds(fabrics_yaml(storage=table))
    assert [ib(store.create_network(f"n{i}", "ta", CFG, k))["ib-storage"] for i in range(2)] == [
        (3505, 0x1234), (3507, 0x1300)]  # fmt: skip
    with pytest.raises(Exception, match=r"no free value left in fabrics\.ib-storage\.segments\.seg_range"):
        store.create_network("n2", "ta", CFG, k)
    assert stored(store) == ["n0", "n1"]


def test_adopt_takes_only_ids_of_the_instances_own_pool(store: Store) -> None:
    made = adopt_network(store, "n1", "ta", CFG, {"ib-compute": 3100, "ib-storage": 3600}, kinds())
    assert ib(made) == {"ib-compute": (3100, 0x0A64), "ib-storage": (3600, 0x0C64)}
    for ask, field, allowed in (
        ({"ib-storage": 3100}, "segments.ib-storage.seg_id", "3500-3999"),  # ib-compute's id on ib-storage
        ({"ib-compute": 3600}, "segments.ib-compute.seg_id", "3000-3499"),
        ({"ib-compute": 4200}, "segments.ib-compute.seg_id", "3000-3499"),
    ):
        with pytest.raises(ValidationError) as e:
            adopt_network(store, "n2", "ta", CFG, ask, kinds())
        assert (e.value.field, e.value.value, e.value.allowed) == (field, next(iter(ask.values())), allowed)
    with pytest.raises(ConflictError, match="^ib-storage segment 3600 is already used$"):
        adopt_network(store, "n2", "ta", CFG, {"ib-storage": 3600}, kinds())
    assert stored(store) == ["n1"]


def test_without_own_pools_the_instances_share_the_global_pool_as_before(store: Store) -> None:
    shared = kinds(fabrics_yaml(None, None))
    made = [ib(store.create_network(f"n{i}", "ta", CFG, shared)) for i in range(2)]
    assert made == [{"ib-compute": (3000, 0x0A00), "ib-storage": (3001, 0x0A01)},
                    {"ib-compute": (3002, 0x0A02), "ib-storage": (3003, 0x0A03)}]  # fmt: skip
    with pytest.raises(ValidationError) as e:
        adopt_network(store, "n9", "ta", CFG, {"ib-storage": 4100}, shared)
    assert (e.value.field, e.value.allowed) == ("segments.ib-storage.seg_id", "3000-3999")
    assert InfinibandKind().bind("ib-compute").pool(CFG) == (CFG.of(IbSegments).pool, "infiniband.seg_range")


# ---------------------------------------------------------------- checked at load
@pytest.mark.parametrize(
    ("compute", "storage", "field", "value", "why"),
    [
        (COMPUTE, {**STORAGE, "seg_range": "3400-3600"}, "fabrics.ib-storage.segments.seg_range", "3400-3600",
         "overlaps fabrics.ib-compute.segments.seg_range 3000-3499"),
        (COMPUTE, {**STORAGE, "mapping": {"mode": "offset", "base": "0x0b00"}}, "fabrics.ib-storage.segments.mapping.base",
         "PKeys 0x0b00-0x0cf3", "PKey 0x0b00 is also in fabrics.ib-compute.segments PKeys 0x0a00-0x0bf3"),
        (COMPUTE, {"seg_range": "3500-3501", "mapping": {"mode": "table", "table": {3500: "0x1000", 3501: "0x0a05"}}},
         "fabrics.ib-storage.segments.mapping.table", "PKeys 0x0a05-0x1000", "PKey 0x0a05 is also in"),
        (COMPUTE, {**STORAGE, "seg_range": "2900-3100"}, "fabrics.ib-storage.segments.seg_range", "2900-3100",
         None),  # overlaps ethernet.vlan_range first
        (None, STORAGE, "fabrics.ib-storage.segments.seg_range", "3500-3999",
         "overlaps infiniband.seg_range 3000-3999 of config.yaml, the pool of ib-compute"),
        (COMPUTE, {**STORAGE, "seg_range": "3990-4010"}, "fabrics.ib-storage.segments.seg_range", "3990-4010", None),
        (COMPUTE, {"mapping": STORAGE["mapping"]}, "fabrics.ib-storage.segments.seg_range", "missing", None),
        (COMPUTE, {**STORAGE, "mapping": {"mode": "hash"}}, "fabrics.ib-storage.segments.mapping.mode", "hash", None),
        (COMPUTE, {**STORAGE, "pkeys": "0x0c00-0x0dff"}, "fabrics.ib-storage.segments.pkeys", "0x0c00-0x0dff", None),
    ],
    ids=["seg-overlap", "pkey-overlap", "table-pkey-overlap", "ethernet-range", "global-pool", "quarantine",
         "no-range", "bad-mode", "unknown-key"],
)  # fmt: skip
def test_a_bad_or_overlapping_pool_is_one_config_error_and_nothing_is_written(
    store: Store, compute: Any, storage: Any, field: str, value: str, why: str | None
) -> None:
    raw = fabrics_yaml(compute, storage)
    with pytest.raises(ConfigError) as e:
        Actions(store, lambda: CFG, network_kinds=lambda: kinds(raw)).create_network(LOCAL_ADMIN, "n1", "ta")
    assert (e.value.field, e.value.value) == (field, value)
    assert "\n" not in str(e.value)
    if why is not None:
        assert f"({why}" in str(e.value)
    with pytest.raises(ConfigError) as again:  # the engine refuses the same file when it loads it
        Fabrics.from_config(raw, Registry.from_entry_points(), segments=CFG)
    assert again.value.field == field
    assert stored(store) == []


def test_the_vlan_pools_checked_are_config_yamls() -> None:
    narrow = parse_segments({"ethernet": {"vlan_range": "2000-2499", "quarantine_vlan": 2999},
                                      "infiniband": {"seg_range": "3000-3499"}})  # fmt: skip
    fine = fabrics_yaml(COMPUTE, {**STORAGE, "seg_range": "2500-2900"})
    assert [k.instance for k in kinds(fine, narrow) if k.name == "infiniband"] == ["ib-compute", "ib-storage"]
    with pytest.raises(ConfigError) as e:
        kinds(fabrics_yaml(COMPUTE, {**STORAGE, "seg_range": "2500-2999"}), narrow)
    assert (e.value.field, e.value.allowed) == (
        "fabrics.ib-storage.segments.seg_range",
        "not containing the quarantine VLAN 2999",
    )


def test_pools_side_by_side_pass_and_todays_fabrics_yaml_is_unchanged() -> None:
    InfinibandKind().check_instances({"ib-compute": {"segments": COMPUTE}, "ib-storage": {"segments": STORAGE}}, CFG)
    InfinibandKind().check_instances({"ib-compute": {}, "ib-storage": {}}, CFG)  # one shared global pool
    InfinibandKind().check_instances({"infiniband": {"driver": "opensm", "options": {}}}, None)
    k = InfinibandKind().bind("ib-storage", {"segments": STORAGE})
    pool, field = k.pool(CFG)
    assert (str(pool.seg_range), f"0x{pool.base:04x}", field) == (
        "3500-3999",
        "0x0c00",
        "fabrics.ib-storage.segments.seg_range",
    )


# ---------------------------------------------------------------- the instances a network spans
def test_a_network_spans_the_instances_it_names(store: Store) -> None:
    eth_and_ib = kinds()
    only = adopt_network(store, "n1", "ta", CFG, {}, eth_and_ib, ["ib-compute"])
    assert [s.fabric for s in only.segments] == ["ib-compute"]
    both = adopt_network(store, "n2", "ta", CFG, {}, eth_and_ib, ["ib-storage", "ib-compute", "ib-storage"])
    assert [s.fabric for s in both.segments] == ["ib-compute", "ib-storage"]
    every = adopt_network(store, "n3", "ta", CFG, {}, eth_and_ib)
    assert [s.fabric for s in every.segments] == ["ethernet", "ib-compute", "ib-storage"]
    assert [ib(n) for n in (only, both, every)] == [
        {"ib-compute": (3000, 0x0A00)},
        {"ib-compute": (3001, 0x0A01), "ib-storage": (3500, 0x0C00)},
        {"ib-compute": (3002, 0x0A02), "ib-storage": (3501, 0x0C01)},
    ]


@pytest.mark.parametrize(
    ("fabrics", "segments", "value", "reason"),
    [
        (["ib-compute", "ib-nope"], {}, "ib-nope", None),
        (["nvlink"], {}, "nvlink", "fabric nvlink has no per-network segment"),
        (["ib-compute"], {"ib-storage": 3600}, ["ib-compute"], None),
    ],
    ids=["unknown", "no-segment-kind", "not-the-segments-instances"],
)
def test_a_bad_fabrics_list_is_one_validation_error_and_nothing_is_written(
    store: Store, fabrics: list[str], segments: dict[str, int], value: Any, reason: str | None
) -> None:
    with pytest.raises(ValidationError) as e:
        adopt_network(store, "n1", "ta", CFG, segments, kinds(), fabrics)
    assert (e.value.field, e.value.value) == ("fabrics", value)
    if not segments:
        assert e.value.allowed == "configured fabric instances: ethernet, ib-compute, ib-storage"
    if reason:
        assert f"({reason})" in str(e.value)
    assert stored(store) == []


def test_the_cli_names_the_option_and_lists_what_a_network_spans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "fabrics.yaml").write_text(yaml.safe_dump(fabrics_yaml()))
    monkeypatch.setenv("GPUFABRIC_HOME", str(tmp_path))
    monkeypatch.setenv("GPUFABRIC_DB", "")
    run = CliRunner().invoke
    assert run(app, ["tenant", "create", "ta"]).exit_code == 0
    bad = run(app, ["network", "create", "n0", "--tenant", "ta", "--fabric", "ib-nope"])
    assert isinstance(bad.exception, ValidationError) and bad.exception.field == "--fabric"
    assert str(bad.exception).startswith("invalid --fabric: 'ib-nope'")
    made = run(app, ["network", "create", "n1", "--tenant", "ta", "--fabric", "ib-storage", "--json"])
    assert made.exit_code == 0, made.output
    assert [(s["fabric"], s["seg_id"], s["pkey"]) for s in json.loads(made.output)["segments"]] == [
        ("ib-storage", 3500, "0x0c00")
    ]
    listed = run(app, ["network", "list", "--json"])
    assert [[s["fabric"] for s in n["segments"]] for n in json.loads(listed.output)] == [["ib-storage"]]
    table = run(app, ["network", "list"], env={"COLUMNS": "200"}).output
    assert "ib-storage" in table and "seg 3500 -> pkey 0x0c00" in table and "n0" not in table


def test_site_check_reads_a_subnets_own_pool_against_its_tables() -> None:
    """``site check`` (IB-PKEY-POOL): a partition on ib-storage that gpufabric did not write,
    PKey 0x1005, clashes with ib-storage's own pool (0x1000-0x11f3) and is named so; on the
    global pool (0x0a00-0x0de7) the same table is no clash."""
    reg = Registry.from_entry_points()
    register(reg)
    port, sm = Guid(0x0002C90300000801), Guid(0x0002C90300FF0002)
    section = {"driver": "mem-sm", "options": {"ports": [str(port)], "trusted_sm_guids": [str(sm)]}}
    found = {}
    for label, sec in (("own", {**section, "segments": {**STORAGE, "mapping": {"mode": "offset", "base": "0x1000"}}}),
                       ("global", section)):  # fmt: skip
        backend = InfinibandKind().bind("ib-storage", sec).build(sec, reg.get, {"trusted_sm_guids": (sm,)})
        backend.sm.set_table(port, (0x7FFF, 0x9005))  # type: ignore[attr-defined]
        found[label] = [
            (c.level.value, c.message) for c in backend.site_checks(SiteContext(segments=CFG)) if c.id == "IB-PKEY-POOL"
        ]
    assert found["own"] == [("error", f"fabrics.ib-storage.segments (PKeys 0x1000-0x11f3): PKey 0x1005 (seg_id 3505) is "
                                      f"already used on the subnet by PKey table of port {port}, not by a gpufabric network")]  # fmt: skip
    assert [lv for lv, _ in found["global"]] == ["ok"] and "0x0a00-0x0de7" in found["global"][0][1]


def test_the_ipoib_partition_limit_counts_each_subnets_own_partitions() -> None:
    """Each IPoIB partition takes a multicast LID on its own subnet's switches: with pools of
    their own, 1,023 partitions on ib-compute exhaust ib-compute only; ib-storage still allocates."""
    cfg = parse_segments({"user_vlan_range": "2-99", "ethernet": {"vlan_range": "100-199", "quarantine_vlan": 200},
                                   "infiniband": {"seg_range": "300-399"}})  # fmt: skip
    pools = {"ib-compute": {"seg_range": "1000-2199", "mapping": {"base": "0x1000"}},
             "ib-storage": {"seg_range": "2200-3399", "mapping": {"base": "0x2000"}}}  # fmt: skip
    InfinibandKind().check_instances({n: {"segments": p} for n, p in pools.items()}, cfg)
    compute, storage = (InfinibandKind().bind(n, {"segments": p}) for n, p in pools.items())
    pool, _ = compute.pool(cfg)
    used = [segment("ib-compute", i, pkey=pool.pkey_for(i)) for i in range(1000, 1000 + IPOIB_PARTITION_LIMIT)]
    with pytest.raises(ExhaustedError) as e:
        compute.allocate(Network("n", "ta"), used, cfg)
    assert e.value.fields["field"] == "fabrics.ib-compute.segments.seg_range"
    got = storage.allocate(Network("n", "ta"), used, cfg)
    assert got is not None and (got.fabric, got.seg_id, segment_pkey(got) and segment_pkey(got).value) == ("ib-storage", 2200, 0x2000)
