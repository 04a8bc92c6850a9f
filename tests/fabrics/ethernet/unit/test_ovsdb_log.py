"""Parsing `ovsdb-tool show-log -m` (recorded from a real ovsdb-server 3.1)."""

from __future__ import annotations

from pathlib import Path

from gpufabric.fabrics.ethernet.drivers.ovsdb.driver import COMMENT_PREFIX
from gpufabric.fabrics.ethernet.readers.ovsdb_log import RowChange, parse_show_log, records_with_comment

FIXTURE = Path(__file__).parents[3] / "fixtures" / "ovsdb" / "show-log-apply.txt"


def test_parse_recorded_show_log() -> None:
    records = parse_show_log(FIXTURE.read_text())
    assert [r.index for r in records] == list(range(12))
    assert records[0].comment == "" and records[0].rows == ()
    ours = records_with_comment(records, COMMENT_PREFIX)
    assert len(ours) == 1
    (apply,) = ours
    assert apply.index == 8
    assert apply.comment == "gpufabric: apply 3 port(s) on gfxe3br"
    assert sorted(r.name for r in apply.rows_of("Port")) == ["gfxe3p1", "gfxe3p2", "gfxe3p3"]
    assert {r.action for r in apply.rows_of("Port")} == {"diff"}
    assert records[4].rows_of("Bridge") == (RowChange("Bridge", "gfxe3br", "insert"),)
    assert records[10].rows_of("Port") == (RowChange("Port", "gfxe3p3", "delete"),)
    assert records[2].rows == (RowChange("Open_vSwitch", "e4e46417", "diff"),)


def test_parse_empty() -> None:
    assert parse_show_log("") == ()
