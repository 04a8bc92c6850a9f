"""What the NAPALM comparison (docs/ethernet-dialects-vs-napalm.md) changed, one test per
resolved difference. NAPALM (napalm-automation/napalm at ee70e63, Apache-2.0) and its community
drivers read the same devices; where one of them reads a form or applies a default that a
gpufabric dialect missed, the dialect now does too. Each test fails on the code before the change
(checked by reverting the change, see the commit messages)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpufabric.domain.errors import ApplyError
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.drivers.ssh.dialects import load_dialect
from gpufabric.fabrics.ethernet.readers.jsonread import json_documents, ports_of, read_nxos_json
from gpufabric.fabrics.ethernet.readers.running_config import parse_running_config
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode

from support.real_outputs import manifest, real_output
from support.ssh_double import double_driver, port_names

Q = 999


# --------------------------------------------------------------------------- NX-OS: TABLE_* as a list
def test_nxos_table_printed_as_a_list_of_row_objects_is_read_like_the_object_form() -> None:
    """NAPALM's ``_get_table_rows`` (nxos.py:677-697) reads ``TABLE_x`` as an object holding
    ``ROW_x`` or as a list of such objects. The real Nexus 3548 answer, re-shaped the second way
    (its 62 rows split over two table objects, the second holding one row as an object), reads
    the same; the reader used to fail on it (``'list' object has no attribute 'get'``)."""
    text = real_output(manifest("ethernet/nxos-json", "napalm-n3548-show-interface.json"))
    doc = next(iter(json_documents(text)))
    rows: list[dict[str, Any]] = doc["TABLE_interface"]["ROW_interface"]
    listed = {"TABLE_interface": [{"ROW_interface": rows[:-1]}, {"ROW_interface": rows[-1]}]}
    want, got = read_nxos_json(text), read_nxos_json(json.dumps(listed))
    assert len(got.interfaces) == 62
    assert got == want
    assert ports_of(got, "sw") == ports_of(want, "sw")


# --------------------------------------------------------------------------- EOS: configuration sessions
def test_eos_batch_with_a_refused_line_leaves_the_switch_as_it_was() -> None:
    """NAPALM stages an EOS change in ``configure session`` and aborts the session when a line is
    refused (eos.py:410-417, 442-452, 545); the eos dialect now does the same: the first port's
    lines, accepted, are not applied when the second port's line is refused. With ``configure
    terminal`` the first port was left changed."""
    ports = port_names("eos", 2)
    drv, double = double_driver("eos", "leaf", ports, Q)
    double.refuse.add("switchport access vlan 702")  # type: ignore[attr-defined]
    with pytest.raises(ApplyError, match="batch was aborted: nothing left applied"):
        drv.apply([EthernetPortConfig("leaf", ports[0], PortMode.ACCESS, VlanId(701)),
                   EthernetPortConfig("leaf", ports[1], PortMode.ACCESS, VlanId(702))])  # fmt: skip
    state = drv.observe()
    assert [state.port(p) for p in ports] == [EthernetPortConfig("leaf", p, PortMode.SHUTDOWN) for p in ports]
    assert double.pending == {}  # type: ignore[attr-defined]  # the session was aborted, not left pending
    drv.apply([EthernetPortConfig("leaf", ports[0], PortMode.ACCESS, VlanId(701))])  # committed
    assert drv.observe().port(ports[0]) == EthernetPortConfig("leaf", ports[0], PortMode.ACCESS, VlanId(701))


# --------------------------------------------------------------------------- NX-OS: checkpoint and rollback
def test_nxos_batch_with_a_refused_line_is_rolled_back_to_its_checkpoint() -> None:
    """NAPALM checkpoints the NX-OS running config before a merge and rolls back to it when a line
    is refused (nxos.py:212-221, 292-294; nxos_ssh.py:529-544); the nxos dialect now does the
    same, and deletes the checkpoint file after either outcome. With ``configure terminal`` alone
    the first port was left changed (and saved)."""
    ports = port_names("nxos", 2)
    drv, double = double_driver("nxos", "leaf", ports, Q)
    double.refuse.add("switchport access vlan 702")  # type: ignore[attr-defined]
    with pytest.raises(ApplyError, match="batch was aborted: nothing left applied"):
        drv.apply([EthernetPortConfig("leaf", ports[0], PortMode.ACCESS, VlanId(701)),
                   EthernetPortConfig("leaf", ports[1], PortMode.ACCESS, VlanId(702))])  # fmt: skip
    state = drv.observe()
    assert [state.port(p) for p in ports] == [EthernetPortConfig("leaf", p, PortMode.SHUTDOWN) for p in ports]
    drv.apply([EthernetPortConfig("leaf", ports[0], PortMode.ACCESS, VlanId(701))])
    assert drv.observe().port(ports[0]) == EthernetPortConfig("leaf", ports[0], PortMode.ACCESS, VlanId(701))
    assert double.files == {}  # type: ignore[attr-defined]  # both checkpoints deleted


# --------------------------------------------------------------------------- Junos: groups, unit disable
def test_junos_reads_the_statements_a_port_inherits_from_apply_groups() -> None:
    """A ToR that sets ``interface-mode trunk`` in a wildcard group (``groups TOR interfaces
    <ge-*>``, applied with ``apply-groups TOR``) and only ``vlan members`` on the port: read as
    the trunk it is (NAPALM reads the configuration with inheritance, junos.py:101-111), where
    the plain ``| display set`` read made it an access port in VLAN 2001."""
    drv, double = double_driver("junos", "leaf", (), Q)
    fam = ("unit", "0", "family", "ethernet-switching")
    double.active += [  # type: ignore[attr-defined]
        ("apply-groups", "TOR"),
        ("groups", "TOR", "interfaces", "<ge-*>", *fam, "interface-mode", "trunk"),
        ("interfaces", "ge-0/0/40", *fam, "vlan", "members", "2001"),
        ("interfaces", "ge-0/0/40", *fam, "vlan", "members", "2002"),
        ("interfaces", "ge-0/0/41", *fam, "interface-mode", "access"),  # its own mode wins
        ("interfaces", "ge-0/0/41", *fam, "vlan", "members", "2003"),
    ]
    state = drv.observe()
    assert state.port("ge-0/0/40") == EthernetPortConfig(
        "leaf", "ge-0/0/40", PortMode.TRUNK, None, (VlanId(2001), VlanId(2002))
    )
    assert state.port("ge-0/0/41") == EthernetPortConfig("leaf", "ge-0/0/41", PortMode.ACCESS, VlanId(2003))


SWITCHING_UNIT_OFF = """\
set interfaces ge-0/0/7 unit 0 disable
set interfaces ge-0/0/7 unit 0 family ethernet-switching interface-mode access
set interfaces ge-0/0/7 unit 0 family ethernet-switching vlan members 101
set interfaces ge-0/0/8 unit 0 family ethernet-switching interface-mode access
set interfaces ge-0/0/8 unit 0 family ethernet-switching vlan members 101
set interfaces ge-0/0/9 unit 5 disable
set interfaces ge-0/0/9 unit 0 family ethernet-switching interface-mode trunk
set interfaces ge-0/0/9 unit 0 family ethernet-switching vlan members 101
set vlans gpf101 vlan-id 101
"""


def test_junos_a_disabled_switching_unit_is_read_shut_down() -> None:
    """``unit 0 disable`` takes the logical interface down (NAPALM reads its ``iff-down`` flag as
    not enabled, junos_views.yml:30-34): the port carries nothing and is read SHUTDOWN, not as an
    access port in VLAN 101. Another unit disabled leaves the switching unit as it is."""
    st = parse_running_config(load_dialect("junos"), SWITCHING_UNIT_OFF, switch="sw")
    assert st.port("ge-0/0/7") == EthernetPortConfig("sw", "ge-0/0/7", PortMode.SHUTDOWN)
    assert st.port("ge-0/0/8") == EthernetPortConfig("sw", "ge-0/0/8", PortMode.ACCESS, VlanId(101))
    assert st.port("ge-0/0/9") == EthernetPortConfig("sw", "ge-0/0/9", PortMode.TRUNK, None, (VlanId(101),))


# --------------------------------------------------------------------------- NVUE: a failed batch is dropped
def test_nvue_batch_starts_by_dropping_what_a_failed_batch_staged() -> None:
    """napalm-cumulus aborts a failed load (``net abort``, cumulus.py:122-125); NVUE keeps the
    ``nv set`` lines of a batch that stopped before ``nv config apply`` in its pending revision,
    so the dialect's batch now starts with ``nv config detach`` and the next apply leaves the
    failed batch's port alone (tests/fabrics/ethernet/unit/test_ssh_double.py has the same case through the CLI)."""
    ports = port_names("nvue", 2)
    drv, _ = double_driver("nvue", "leaf", ports, 4000, unchecked=True)  # the switch refuses nosuchport0
    with pytest.raises(ApplyError, match="nosuchport0"):
        drv.apply([EthernetPortConfig("leaf", ports[0], PortMode.ACCESS, VlanId(601)),
                   EthernetPortConfig("leaf", "nosuchport0", PortMode.ACCESS, VlanId(601))])  # fmt: skip
    drv.apply([EthernetPortConfig("leaf", ports[1], PortMode.ACCESS, VlanId(700))])
    state = drv.observe()
    assert state.port(ports[0]) == EthernetPortConfig("leaf", ports[0], PortMode.SHUTDOWN)
    assert state.port(ports[1]) == EthernetPortConfig("leaf", ports[1], PortMode.ACCESS, VlanId(700))
    assert drv.render([EthernetPortConfig("leaf", ports[1], PortMode.SHUTDOWN)])[0] == "nv config detach"
