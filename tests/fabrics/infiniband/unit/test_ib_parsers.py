"""Parsers of real infiniband-diags / OpenSM output recorded from ibsim + OpenSM."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.readers.diags import (
    parse_opensm_log,
    parse_sminfo,
    parse_smpquery_nodeinfo,
    parse_smpquery_pkeys,
    parse_smpquery_portinfo,
)
from gpufabric.fabrics.infiniband.state import SmState

DIAGS = Path(__file__).parents[3] / "fixtures" / "infiniband-diags"
OSM = Path(__file__).parents[3] / "fixtures" / "opensm"


def diag(name: str) -> str:
    return (DIAGS / name).read_text()


@pytest.mark.parametrize(
    ("fixture", "entries", "capacity"),
    [
        ("smpquery-pkeys.tenant-ca.txt", (0x7FFF, 0x8A01), 64),
        ("smpquery-pkeys.sm-port.txt", (0xFFFF,), 64),
        ("smpquery-pkeys.after-rogue.txt", (0xFFFF,), 64),
    ],
    ids=["tenant-ca", "sm-port", "after-rogue"],
)
def test_pkeys(fixture: str, entries: tuple[int, ...], capacity: int) -> None:
    d = parse_smpquery_pkeys(diag(fixture))
    assert d.entries == entries
    assert d.capacity == capacity


def test_pkeys_full_table() -> None:
    d = parse_smpquery_pkeys(diag("smpquery-pkeys.full-table.txt"))
    assert len(d.entries) == 64
    assert 0x7FFF in d.entries


@pytest.mark.parametrize("text", ["", "smpquery: iberror: failed: operation pkeys: node info query failed\n"])
def test_pkeys_rejects(text: str) -> None:
    with pytest.raises(ValidationError):
        parse_smpquery_pkeys(text)


def test_nodeinfo_ca() -> None:
    n = parse_smpquery_nodeinfo(diag("smpquery-nodeinfo.ca.txt"))
    assert n.is_ca
    assert n.port_guid == Guid(0x0002C90310000101)
    assert n.node_guid == Guid(0x0002C90310000100)
    assert n.partition_cap == 64
    assert n.num_ports == 1


def test_nodeinfo_switch() -> None:
    n = parse_smpquery_nodeinfo(diag("smpquery-nodeinfo.switch.txt"))
    assert n.node_type == "Switch"
    assert not n.is_ca
    assert n.partition_cap == 8


def test_portinfo_ca_and_sm_port() -> None:
    ca = parse_smpquery_portinfo(diag("smpquery-portinfo.ca.txt"))
    sm = parse_smpquery_portinfo(diag("smpquery-portinfo.sm-port.txt"))
    assert ca.sm_lid == 1 and ca.lid > 1
    assert not ca.is_sm
    assert sm.is_sm and sm.lid == 1
    assert ca.link_state == "Active"


def test_portinfo_rogue_port_runs_an_sm() -> None:
    p = parse_smpquery_portinfo(diag("smpquery-portinfo.rogue-port.txt"))
    assert p.is_sm
    assert p.sm_lid == p.lid  # it made itself master


@pytest.mark.parametrize(
    ("fixture", "guid", "priority", "lid"),
    [("sminfo.master.txt", 0x0002C90310000001, 14, 1), ("sminfo.rogue-master.txt", 0x0002C90310000401, 15, 7)],
    ids=["trusted", "rogue"],
)
def test_sminfo(fixture: str, guid: int, priority: int, lid: int) -> None:
    s = parse_sminfo(diag(fixture))
    assert s.guid == Guid(guid)
    assert s.priority == priority
    assert s.state is SmState.MASTER
    assert s.lid == lid


def test_sminfo_rejects_error_output() -> None:
    with pytest.raises(ValidationError):
        parse_sminfo("sminfo: iberror: failed: query\n")


def test_log_good_hup() -> None:
    scan = parse_opensm_log((OSM / "log.hup-good.txt").read_text())
    assert scan.ok
    assert scan.subnet_up == 1


def test_log_parse_error() -> None:
    scan = parse_opensm_log((OSM / "log.hup-parse-error.txt").read_text())
    assert not scan.ok
    assert any("PARSE ERROR" in e for e in scan.parse_errors)
    assert scan.subnet_up == 1


def test_log_table_full() -> None:
    scan = parse_opensm_log((OSM / "log.hup-table-full.txt").read_text())
    assert scan.parse_errors == ()
    assert scan.pkey_errors and all("ERR 0512" in e for e in scan.pkey_errors)


def test_log_rogue_takeover() -> None:
    assert parse_opensm_log((OSM / "log.rogue-takeover.txt").read_text()).last_state == "STANDBY"
