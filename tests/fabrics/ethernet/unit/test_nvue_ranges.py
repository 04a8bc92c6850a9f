"""NVUE range keys (issue 31 item 8): ``nv config show`` / startup.yaml carry settings on range
keys (``bond1-3``, ``swp5-6,8``, ``swp1,51-54``) that apply to each member and merge with the
member's own key. Held to tests/fixtures/nvue/range-keys.yaml, a documented-format fixture (not a
real output: its manifest says what NVIDIA documents and what NVUE was seen to print), and to the
real NVUE outputs of the corpus (tests/fixtures/real/ethernet/nvue/), which still read the same."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpufabric.fabrics.ethernet.drivers.ssh.dialects import load_dialect
from gpufabric.fabrics.ethernet.readers.running_config import expand_ifnames, parse_running_config

from support.port_readings import assert_readings

FIXTURE = Path(__file__).parents[3] / "fixtures" / "nvue" / "range-keys.yaml"


def test_regression_range_keys_merge_into_one_port_per_member() -> None:
    """Fails on be1d2a3: bond1 read twice (access 10 from its key, a trunk of br_default from
    bond1-3), "8" and "51".."54" read as interface names, swp6 twice (access 30 and shut down)."""
    manifest = yaml.safe_load(FIXTURE.with_name(FIXTURE.name + ".source.yaml").read_text())
    assert manifest["kind"] == "documented-format"
    st = parse_running_config(load_dialect("nvue"), FIXTURE.read_text(), switch="leaf01")
    names = [p.port for p in st.ports]
    assert len(names) == len(set(names)), names  # one port per member
    got = {p.port: p for p in st.ports}
    exp = manifest["expected"]
    assert_readings(got, exp["ports"])
    for name in exp["absent"]:
        assert name not in got


@pytest.mark.parametrize(
    ("key", "names"),
    [
        ("swp1", ["swp1"]),
        ("bond1-3", ["bond1", "bond2", "bond3"]),
        ("swp1-2,swp49-50", ["swp1", "swp2", "swp49", "swp50"]),
        ("swp1,51-54", ["swp1", "swp51", "swp52", "swp53", "swp54"]),  # the prefix carries over the comma
        ("swp5-6,8", ["swp5", "swp6", "swp8"]),
        ("vlan10,20,30", ["vlan10", "vlan20", "vlan30"]),
        ("swp1s0-1,swp2s3", ["swp1s0", "swp1s1", "swp2s3"]),  # breakout ports
        ("peerlink.4094", ["peerlink.4094"]),
    ],
)
def test_expand_ifnames(key: str, names: list[str]) -> None:
    assert expand_ifnames(key) == names
