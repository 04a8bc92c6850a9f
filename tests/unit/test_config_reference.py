"""docs/config-reference.md is generated from the validators and driver signatures
(tools/config_reference.py): the checked-in file must be current, and what it lists must come
from the code (a new driver option, quota or segment key shows up without a hand edit)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gpufabric.domain.quotas import Quotas
from gpufabric.store.registry import Registry

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("config_reference", ROOT / "tools" / "config_reference.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["config_reference"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_checked_in_reference_is_current(gen: ModuleType) -> None:
    want = gen.render()
    assert (ROOT / "docs" / "config-reference.md").read_text() == want, "run: python tools/config_reference.py"
    assert gen.main(["--check"]) == 0


def test_every_driver_kind_and_quota_is_listed(gen: ModuleType) -> None:
    text = gen.render()
    reg = Registry.from_entry_points()
    for name in reg.drivers:
        assert f"#### driver `{name}`" in text
    for kind in reg.kinds:
        assert f"### `{kind}:`" in text
    for f in Quotas.__dataclass_fields__:
        assert f"`quotas.{f}`" in text
    assert "| `segments.ethernet.quarantine_vlan` | `4000` | 1-4094; 2-4094 (never VLAN 1) |" in text
    assert "| `known_hosts` | str \\| None | `None` |" in text  # ssh driver, from its signature


def test_a_new_driver_option_appears(gen: ModuleType) -> None:
    class Probe:
        def __init__(self, *, switch: str, quarantine_vlan: int, hold_down: float = 2.5, sleep: object = None) -> None: ...

    Probe.__module__ = "gpufabric.fabrics.ethernet.probe"
    reg = Registry.from_entry_points()
    reg.register("probe", Probe)
    text = gen.render(reg)
    assert "#### driver `probe`" in text
    assert "| `hold_down` | float | `2.5` |" in text
    assert "| `quarantine_vlan` | int | required (injected: config.yaml segments.ethernet.quarantine_vlan) |" in text
    assert "`sleep`" not in text.split("#### driver `probe`")[1].split("####")[0]  # a code seam, not configuration


def test_segment_keys_come_from_the_validator_source(gen: ModuleType) -> None:
    keys = dict(gen.segment_keys())
    assert set(keys) == {"user_vlan_range", "ethernet.vlan_range", "ethernet.quarantine_vlan", "infiniband.seg_range",
                         "infiniband.mapping.mode", "infiniband.mapping.base", "infiniband.mapping.table"}  # fmt: skip
    assert keys["ethernet.vlan_range"] == "'2000-2999'"


def test_the_segments_parser_refuses_every_key_it_does_not_read(gen: ModuleType) -> None:
    """The keys ``segments:`` accepts (the core's ``user_vlan_range`` and the keys each kind's section
    parser lets through) are exactly those the parsers read (the reference lists), and any other is a
    ConfigError naming it: a typo no longer leaves a default silently in force, and the unused
    ``nvlink.partition_range`` (never read by the NVLink kind) is gone."""
    from gpufabric.domain.errors import ConfigError
    from gpufabric.domain.segments import USER_KEY
    from gpufabric.fabrics.ethernet.segments import KEYS as VLAN_KEYS
    from gpufabric.fabrics.infiniband.segments import MAPPING_KEYS, POOL_KEYS
    from gpufabric.store.registry import parse_segments

    read = {k for k, _ in gen.segment_keys()}
    accepted = {USER_KEY} | {f"ethernet.{k}" for k in VLAN_KEYS}
    accepted |= {f"infiniband.{k}" for k in POOL_KEYS if k != "mapping"} | {f"infiniband.mapping.{k}" for k in MAPPING_KEYS}
    assert accepted == read
    for raw, field in (({"nvlink": {"partition_range": "0-63"}}, "segments.nvlink"),
                       ({"ethernet": {"vlan_rnage": "5-9"}}, "segments.ethernet.vlan_rnage"),
                       ({"infiniband": {"mapping": {"bsae": "0x0b00"}}}, "segments.infiniband.mapping.bsae")):  # fmt: skip
        with pytest.raises(ConfigError) as e:
            parse_segments(raw)
        assert e.value.field == field and "known keys only" in e.value.allowed


def test_a_kinds_segment_keys_come_from_its_own_parser(gen: ModuleType) -> None:
    """A kind registered with a section of its own shows up in the reference with its keys and
    defaults, read from its parser (no hand edit)."""
    from support.toy_segments import ToyKind

    reg = Registry.from_entry_points(drivers=False)
    reg.register_kind(ToyKind())
    assert {k: v for k, v in gen.segment_keys(reg) if k.startswith("toy.")} == {"toy.ids": "'4001-4049'", "toy.tag": "4050"}
    text = gen.render(reg)
    assert "| `segments.toy.ids` | `'4001-4049'` | 'START-END' or [start, end]; inside 1-4094 |" in text
    assert ", toy ids 4001-4049. Any other key" in text
