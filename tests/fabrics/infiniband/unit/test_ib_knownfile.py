"""The file the OpenSM driver last wrote, kept parsed: same answers as parsing it again."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufabric.domain.values import Guid, Membership, PKey
from gpufabric.fabrics.infiniband.drivers.opensm import knownfile
from gpufabric.fabrics.infiniband.drivers.opensm.knownfile import KnownFile, affected_ports, parse_known, safe_parse
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember
from gpufabric.fabrics.infiniband.state.partitions import (
    changed_ports,
    check_layout,
    entries_by_port,
    layout_guids,
    parse_partitions_conf,
    render_checked,
    render_partitions_conf,
)

SM = Guid(0x0002C90310000001)
POOL = [Guid(0x0002C90320000000 | n) for n in range(1, 9)]


@st.composite
def layouts(draw: st.DrawFn) -> PartitionLayout:
    keys = draw(st.lists(st.integers(1, 40), max_size=4, unique=True))
    parts = tuple(
        Partition(
            f"t{k}",
            PKey(k),
            tuple(draw(st.lists(st.builds(PartitionMember, st.sampled_from(POOL), st.sampled_from(Membership)), max_size=6))),
            draw(st.booleans()),
        )
        for k in keys
    )  # fmt: skip
    return PartitionLayout(parts, tuple(draw(st.lists(st.sampled_from(POOL), max_size=2))), draw(st.booleans()))


def known(layout: PartitionLayout) -> KnownFile:
    norm = check_layout(layout, [SM])
    return KnownFile(render_checked(norm), norm, entries_by_port(norm))


@settings(max_examples=300, deadline=None)
@given(layouts(), layouts())
def test_affected_ports_from_the_known_file_equal_those_from_parsing_it(a: PartitionLayout, b: PartitionLayout) -> None:
    was, new = known(a), known(b)
    parsed = parse_partitions_conf(was.text)
    want = layout_guids(new.layout) if was.text == new.text else changed_ports(parsed, new.layout)
    assert affected_ports(was.text, parse_known(was.text, was), new, was) == want
    assert affected_ports(was.text, parsed, new, None) == want  # the same without the known file


@settings(max_examples=100, deadline=None)
@given(layouts())
def test_render_checked_is_render_of_the_checked_layout(layout: PartitionLayout) -> None:
    assert render_checked(check_layout(layout, [SM])) == render_partitions_conf(layout, [SM])


def test_the_known_text_is_not_parsed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    was = known(PartitionLayout((Partition("a", PKey(0x0A01), (PartitionMember(POOL[0]),)),)))

    def no_parse(text: str) -> PartitionLayout:
        raise AssertionError("parsed")

    monkeypatch.setattr(knownfile, "parse_partitions_conf", no_parse)
    assert parse_known(was.text, was) is was.layout


def test_other_text_is_parsed_and_bad_text_is_none() -> None:
    was = known(PartitionLayout((Partition("a", PKey(0x0A01), (PartitionMember(POOL[0]),)),)))
    edited = render_partitions_conf(PartitionLayout((Partition("a", PKey(0x0A01), (PartitionMember(POOL[1]),)),)), [SM])
    got = parse_known(edited, was)
    assert got is not None and [m.guid for m in got.partitions[0].members] == [POOL[1]]
    assert parse_known("this line is not a partition\n", was) is None
    assert parse_known(None, was) is None
    assert safe_parse(was.text) == was.layout


def test_a_changed_default_policy_marks_every_port() -> None:
    part = Partition("a", PKey(0x0A01), (PartitionMember(POOL[0]),))
    was, new = known(PartitionLayout((part,))), known(PartitionLayout((part,), default_limited_all=False))
    assert affected_ports(was.text, was.layout, new, was) == {POOL[0], SM}
