"""SONiC config_db of older releases (issue 31 item 9): VLAN membership as a ``members`` list on
the ``VLAN`` entry (before ``VLAN_MEMBER``; also ``PORTCHANNEL`` ``members``), and a missing
``admin_status`` whose default depends on the release: down where the config carries a
``VERSIONS`` table (SONiC 201811 and later: portmgrd's default), up where it does not (release
unknown: the safe assumption for isolation, a port that may forward is never read as shut down).
Held to tests/fixtures/sonic/config_db-members-list.json (documented format, not a real output;
its manifest says where the forms come from) and to a real 2017 config_db.json
(tests/fixtures/real/ethernet/sonic/injinj-arista7050qx32-2017-config_db.json, not committed:
no licence stated; its case skips without it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from gpufabric.fabrics.ethernet.drivers.ssh.dialects import load_dialect
from gpufabric.fabrics.ethernet.readers.running_config import parse_running_config
from gpufabric.fabrics.ethernet.state import PortMode

from support.port_readings import assert_readings
from support.real_outputs import manifest, real_output

FIXTURE = Path(__file__).parents[3] / "fixtures" / "sonic" / "config_db-members-list.json"
EXPECTED: dict[str, Any] = yaml.safe_load(FIXTURE.with_name(FIXTURE.name + ".source.yaml").read_text())["expected"]


def _ports(text: str) -> dict[str, Any]:
    st = parse_running_config(load_dialect("sonic"), text, switch="tor1")
    names = [p.port for p in st.ports]
    assert len(names) == len(set(names)), names
    return {p.port: p for p in st.ports}


def test_regression_members_list_and_missing_admin_status_of_an_unknown_release() -> None:
    """Fails on be1d2a3: every port without admin_status read shut down (so isolated), the
    ``members`` lists ignored (no port in any VLAN)."""
    got = _ports(FIXTURE.read_text())
    assert_readings(got, EXPECTED["ports"])
    for name in EXPECTED["absent"]:
        assert name not in got


def test_missing_admin_status_is_down_where_the_release_is_known() -> None:
    db = json.loads(FIXTURE.read_text()) | {"VERSIONS": {"DATABASE": {"VERSION": "version_1_0_1"}}}
    got = _ports(json.dumps(db))
    assert {n for n, p in got.items() if p.mode is PortMode.SHUTDOWN} == set(EXPECTED["with_versions"]["shutdown"])
    assert got["Ethernet24"].bond == "PortChannel10"


def test_regression_real_2017_config_db_is_not_read_as_all_ports_shut_down() -> None:
    """The Arista 7050QX-32's 2017 config_db.json: be1d2a3 read its 30 PORT entries as shut down
    and no VLAN at all; its 12 Vlan1000 members are access ports of VLAN 1000."""
    got = _ports(real_output(manifest("ethernet/sonic", "injinj-arista7050qx32-2017-config_db.json")))
    assert {n: (p.mode, p.vlans()) for n, p in got.items()} == {
        f"Ethernet{i}": (PortMode.ACCESS, {1000}) for i in (*range(0, 40, 4), 120, 124)
    }


def test_a_vlan_member_table_is_the_membership_and_the_lists_beside_it_are_not_read() -> None:
    """A later release keeps the ``members`` list beside VLAN_MEMBER and ``config vlan member del``
    may leave it stale: VLAN_MEMBER is what vlanmgrd applies."""
    db = json.loads(FIXTURE.read_text()) | {"VLAN_MEMBER": {"Vlan2000|Ethernet16": {"tagging_mode": "tagged"}}}
    got = _ports(json.dumps(db))
    exp = EXPECTED["with_vlan_member"]
    assert {n: (p.mode.value, p.vlan, p.vlans()) for n, p in got.items()} == {
        "Ethernet8": ("shutdown", None, set()), "Ethernet16": ("trunk", None, {2000})}  # fmt: skip
    assert set(exp) == set(got)
