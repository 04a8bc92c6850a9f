"""Each fabric kind owns its section of config.yaml's ``segments:`` (issue 19): the core splits the
section by kind name and hands each registered kind that takes one its own (``FabricKind.segment_config``),
then checks the id ranges the kinds claim against ``user_vlan_range`` and each other, generically.

Proved with a toy kind (tests/support/toy_segments.py) registered beside the built-in ones: its section
is parsed, checked and refused exactly like theirs, its pool reaches ``allocate`` and its settings the
desired state, with no core edit. SQLite store in tmp; no device.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.fabric import FabricKind
from gpufabric.domain.models import Inventory, Node
from gpufabric.domain.segments import IdRange, SegmentConfig, takes_section
from gpufabric.engine.fabrics import Fabrics
from gpufabric.engine.moves import MoveEngine
from gpufabric.fabrics.ethernet.segments import EthernetSegments
from gpufabric.fabrics.infiniband.segments import IbSegments
from gpufabric.store.core import Store
from gpufabric.store.registry import parse_segments, registered_kinds

from support.toy_segments import ToyKind, ToySegments


def kinds() -> list[FabricKind[Any, Any]]:
    return [*registered_kinds(), ToyKind()]


def test_the_core_hands_each_kind_its_own_section() -> None:
    cfg = SegmentConfig.from_dict({"user_vlan_range": "2-99", "toy": {"ids": "4060-4070", "tag": 4071}}, kinds())
    assert list(cfg.sections) == ["ethernet", "infiniband", "toy"]  # the kinds that take one, in order
    assert cfg.of(ToySegments) == ToySegments(IdRange(4060, 4070), 4071, "toy")
    assert cfg.of(EthernetSegments).vlans == IdRange(2000, 2999)  # the others keep their defaults
    assert cfg.of(IbSegments).pool.seg_range == IdRange(3000, 3999)
    assert cfg.settings() == {"quarantine_vlan": 4000, "toy_tag": 4071}
    assert [k.name for k in registered_kinds() if takes_section(k)] == ["ethernet", "infiniband"]


@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        ({"toy": {"ids": "2990-3010"}}, "toy.ids",
         "invalid toy.ids: '2990-3010'; allowed: disjoint from ethernet.vlan_range 2000-2999"),
        ({"toy": {"ids": "3990-3995"}}, "toy.ids",
         "invalid toy.ids: '3990-3995'; allowed: disjoint from infiniband.seg_range 3000-3999"),
        ({"toy": {"ids": "4000-4010"}}, "toy.ids",
         "invalid toy.ids: '4000-4010'; allowed: not containing the quarantine VLAN 4000"),
        ({"toy": {"tag": 3500}}, "toy.tag",
         "invalid toy.tag: 3500; allowed: outside 2-1999 and 2000-2999 and 4000 and 3000-3999 and 4001-4049"),
        ({"infiniband": {"seg_range": "4001-4010"}}, "toy.ids",  # the later kind's key is named
         "invalid toy.ids: '4001-4049'; allowed: disjoint from infiniband.seg_range 4001-4010"),
        ({"ethernet": {"quarantine_vlan": 4045}}, "toy.ids",
         "invalid toy.ids: '4001-4049'; allowed: not containing the quarantine VLAN 4045"),
        ({"toy": {"ids": "1-9"}}, "toy.ids", "invalid toy.ids: '1-9'; allowed: inside 2-4094 (never VLAN 1, the default VLAN)"),
        ({"toy": {"idz": "1-9"}}, "segments.toy.idz", "invalid segments.toy.idz: '1-9'; allowed: known keys only: ids, tag"),
    ],
)  # fmt: skip
def test_a_kinds_claims_are_checked_against_every_other(raw: dict[str, Any], field: str, message: str) -> None:
    """The cross-kind checks are the core's and generic: a later claim colliding with an earlier one is
    refused naming the later key and what it collides with (a range, or a one-id claim by its name)."""
    with pytest.raises(ConfigError) as e:
        SegmentConfig.from_dict(raw, kinds())
    assert (e.value.field, str(e.value)) == (field, message)


def test_a_section_no_registered_kind_takes_is_refused() -> None:
    with pytest.raises(ConfigError) as e:
        parse_segments({"toy": {"ids": "4060-4070"}})  # the toy not registered
    assert e.value.field == "segments.toy"
    assert e.value.allowed == "known keys only: ethernet, infiniband, user_vlan_range"
    nvlink = next(k for k in registered_kinds() if k.name == "nvlink")
    with pytest.raises(ConfigError, match="nvlink takes none"):
        nvlink.segment_config({}, "nvlink")  # a kind without a section: the seam's default refuses one


def test_a_check_from_elsewhere_skips_the_claims_of_the_section_it_names() -> None:
    """``check_clear`` (an InfiniBand instance's own pool in fabrics.yaml) checks a range against every
    claim but those of the section it belongs beside (the global pool, checked by the kind itself)."""
    cfg = parse_segments()
    cfg.check_clear("fabrics.ib-a.segments.seg_range", IdRange(3100, 3200), besides=cfg.of(IbSegments))
    with pytest.raises(ConfigError, match="disjoint from infiniband.seg_range 3000-3999"):
        cfg.check_clear("x.seg_range", IdRange(3100, 3200))
    with pytest.raises(ConfigError, match="not containing the quarantine VLAN 4000"):
        cfg.check_clear("x.seg_range", IdRange(3990, 4010), besides=cfg.of(IbSegments))


def test_the_kinds_pool_reaches_allocate_and_its_settings_the_desired_state(tmp_path: Path) -> None:
    cfg = SegmentConfig.from_dict({"toy": {"ids": "4060-4061", "tag": 4062}}, kinds())
    toy = ToyKind()
    with Store.open(f"sqlite:///{tmp_path / 'g.db'}") as store:
        store.upsert_inventory(Inventory((Node("n1"),)))
        store.create_tenant("ta")
        made = [store.create_network(f"n{i}", "ta", cfg, [toy]).segment("toy") for i in range(2)]
        assert [s.seg_id for s in made if s is not None] == [4060, 4061]
        engine = MoveEngine(store, Fabrics(kinds={"toy": toy}, segments=cfg), cfg)
        assert engine.desired().get("toy") == (("n1", 4062),)
        assert engine.tenancy().settings["toy_tag"] == 4062
