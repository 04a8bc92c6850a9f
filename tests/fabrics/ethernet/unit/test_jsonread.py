"""The structured read of NX-OS / EOS (``| json``): the pure readers held to real answers
(tests/fixtures/real/ethernet/{nxos,eos}-json/, expected readings written by hand), the
platform defaults, port-channel members, and the SSH driver reading port state from the JSON
answers of the vendor-CLI doubles (and the text read kept for the other dialects)."""

from __future__ import annotations

import json

import pytest

from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.drivers.ssh.dialects import dialect_from_dict, load_dialect, render_json_read
from gpufabric.fabrics.ethernet.readers.jsonread import (
    parse_eos_json,
    parse_nxos_json,
    ports_of,
    read_eos_json,
    read_nxos_json,
)
from gpufabric.fabrics.ethernet.readers.portcfg import ALL_VLANS
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode

from support.real_outputs import Manifest, manifests, real_output
from support.ssh_double import double_driver, sample
from support.ssh_double.ios import IosDouble

REAL = manifests("ethernet/nxos-json") + manifests("ethernet/eos-json")
READ = {"ethernet/nxos-json": read_nxos_json, "ethernet/eos-json": read_eos_json}


def vids(*vs: int) -> tuple[VlanId, ...]:
    return tuple(VlanId(v) for v in vs)


# --------------------------------------------------------------------------- real answers
def test_the_corpus_holds_both_platforms() -> None:
    assert len(manifests("ethernet/nxos-json")) >= 2 and len(manifests("ethernet/eos-json")) >= 2


@pytest.mark.parametrize("m", REAL, ids=lambda m: m.id)
def test_real_answer_is_read_as_written_by_hand(m: Manifest) -> None:
    text = real_output(m)
    exp = m.expected
    reading = READ[m.parser](text)
    if exp["kind"] == "interfaces":
        assert len(reading.interfaces) == exp["interfaces"]
        assert sorted(n for n, s in reading.interfaces.items() if not s.admin_up) == sorted(exp["admin_down"])
        assert {n: s.bundle for n, s in reading.interfaces.items() if s.bundle} == exp["bundles"]
        for mode, count in (exp.get("eth_mode") or {}).items():
            assert sum(1 for s in reading.interfaces.values() if s.mode == mode) == count
        for name in exp.get("no_eth_mode_on", []):
            assert reading.interfaces[name].mode == ""
    else:
        assert len(reading.switchports) == exp["rows"]
    ports = {p.port: p for p in ports_of(reading, "sw")}
    want = exp["ports"]
    assert len(ports) == (want if isinstance(want, int) else len(want))
    for name, e in ({} if isinstance(want, int) else want).items():
        assert ports[name].mode is PortMode(e["mode"])
        assert ports[name].vlan == VlanId(e["vlan"])


# --------------------------------------------------------------------------- defaults (hand-built answers in the real shapes)
def nxos_answer(ifs: list[dict[str, object]], sps: list[dict[str, object]]) -> str:
    return (
        "leaf1# show interface | json\n"
        + json.dumps({"TABLE_interface": {"ROW_interface": ifs}})
        + "\nleaf1# show interface switchport | json\n"
        + json.dumps({"TABLE_interface": {"ROW_interface": sps[0] if len(sps) == 1 else sps}})
        + "\nleaf1# "
    )


def test_nxos_defaults_trunk_without_list_is_every_vlan_and_access_is_vlan_1() -> None:
    text = nxos_answer(
        [{"interface": "Ethernet1/1", "admin_state": "up", "eth_mode": "trunk"},
         {"interface": "Ethernet1/2", "admin_state": "up", "eth_mode": "access"},
         {"interface": "Ethernet1/3", "admin_state": "down", "eth_mode": "access"},
         {"interface": "Ethernet1/4", "admin_state": "up", "eth_mode": "routed"},
         {"interface": "mgmt0", "admin_state": "up"}],
        [{"interface": "Ethernet1/1", "switchport": "Enabled", "oper_mode": "trunk", "native_vlan": "1"},
         {"interface": "Ethernet1/2", "switchport": "Enabled", "oper_mode": "access"},
         {"interface": "Ethernet1/3", "switchport": "Enabled", "oper_mode": "access", "access_vlan": 30},
         {"interface": "Ethernet1/4", "switchport": "Disabled"}],
    )  # fmt: skip
    ports = {p.port: p for p in parse_nxos_json(text, "leaf1", {})}
    assert sorted(ports) == ["Ethernet1/1", "Ethernet1/2", "Ethernet1/3"]
    assert ports["Ethernet1/1"].mode is PortMode.TRUNK
    assert ports["Ethernet1/1"].vlan == VlanId(1)  # native 1 is allowed (every VLAN is)
    assert len(ports["Ethernet1/1"].trunks) == len(ALL_VLANS) - 1
    assert ports["Ethernet1/2"] == EthernetPortConfig("leaf1", "Ethernet1/2", PortMode.ACCESS, VlanId(1))
    assert ports["Ethernet1/3"].mode is PortMode.SHUTDOWN


def test_nxos_native_outside_the_allowed_list_carries_nothing_untagged() -> None:
    text = nxos_answer([], [{"interface": "Ethernet1/9", "switchport": "Enabled", "oper_mode": "trunk",
                             "native_vlan": 999, "trunk_vlans": "100,200-201"}])  # fmt: skip
    (p,) = parse_nxos_json(text, "leaf1", {})
    assert (p.mode, p.vlan, p.trunks) == (PortMode.TRUNK, None, vids(100, 200, 201))


def test_nxos_member_is_read_with_its_channels_vlans() -> None:
    text = nxos_answer(
        [{"interface": "Ethernet1/7", "admin_state": "up", "eth_mode": "trunk", "eth_bundle": "Po10"},
         {"interface": "Ethernet1/8", "admin_state": "down", "eth_bundle": "Po10"},
         {"interface": "Ethernet1/9", "admin_state": "up", "eth_bundle": "Po20"},
         {"interface": "port-channel10", "admin_state": "up", "eth_mode": "trunk", "eth_members": "Eth1/7, Eth1/8"}],
        [{"interface": "port-channel10", "switchport": "Enabled", "oper_mode": "trunk",
          "native_vlan": 999, "trunk_vlans": "100-101"},
         {"interface": "Ethernet1/7", "switchport": "Enabled", "oper_mode": "access", "access_vlan": 1}],
    )  # fmt: skip
    ports = {p.port: p for p in parse_nxos_json(text, "leaf1", {})}
    assert ports["Ethernet1/7"] == EthernetPortConfig("leaf1", "Ethernet1/7", PortMode.TRUNK, None, vids(100, 101))
    assert ports["Ethernet1/8"].mode is PortMode.SHUTDOWN
    assert "Ethernet1/9" not in ports  # its channel is not in the answer, nor its own switchport row: never access VLAN 1
    assert ports["port-channel10"].trunks == vids(100, 101)


def test_eos_defaults_members_and_short_names() -> None:
    text = json.dumps({"interfaces": {
        "Ethernet1": {"interfaceStatus": "connected", "forwardingModel": "bridged"},
        "Ethernet2": {"interfaceStatus": "disabled", "forwardingModel": "bridged"},
        "Ethernet3": {"interfaceStatus": "connected", "forwardingModel": "dataLink",
                      "interfaceMembership": "Member of Port-Channel10"},
        "Ethernet4": {"interfaceStatus": "connected", "forwardingModel": "dataLink"},
        "Port-Channel10": {"interfaceStatus": "connected", "forwardingModel": "bridged"},
        "Management1": {"interfaceStatus": "connected", "forwardingModel": "routed"},
    }}) + "\n" + json.dumps({"sourceDetail": "", "switchports": {
        "Et1": {"enabled": True, "switchportInfo": {"mode": "trunk", "trunkAllowedVlans": "ALL", "trunkingNativeVlanId": 1}},
        "Ethernet2": {"enabled": True, "switchportInfo": {"mode": "access", "accessVlanId": 40}},
        "Po10": {"enabled": True, "switchportInfo": {"mode": "access"}},
    }})  # fmt: skip
    ports = {p.port: p for p in parse_eos_json(text, "leaf", {})}
    assert sorted(ports) == ["Ethernet1", "Ethernet2", "Ethernet3", "Port-Channel10"]
    assert ports["Ethernet1"].mode is PortMode.TRUNK and len(ports["Ethernet1"].trunks) == len(ALL_VLANS) - 1
    assert ports["Ethernet2"].mode is PortMode.SHUTDOWN
    assert ports["Ethernet3"] == EthernetPortConfig(
        "leaf", "Ethernet3", PortMode.ACCESS, VlanId(1)
    )  # the channel's default
    assert "Ethernet4" not in ports  # a member whose channel is not named


def test_not_json_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="json answer"):
        parse_nxos_json("% Invalid command at '^' marker.\n", "leaf1", {})


def test_a_json_parser_needs_its_commands() -> None:
    with pytest.raises(ConfigError, match="json_parser"):
        dialect_from_dict({"name": "x", "transport": "shell", "json_parser": "nxos_json"})
    with pytest.raises(ConfigError, match="json_parser"):
        dialect_from_dict({"name": "x", "transport": "shell", "json_parser": "junos_json", "json_read": ["show x"]})


# --------------------------------------------------------------------------- the driver
@pytest.mark.parametrize(
    ("dialect", "commands"),
    [("nxos", ["show interface | json", "show interface switchport | json"]),
     ("eos", ["show interfaces | json", "show interfaces switchport | json"])],
)  # fmt: skip
def test_driver_reads_nxos_and_eos_from_json(dialect: str, commands: list[str]) -> None:
    assert render_json_read(load_dialect(dialect))[1:] == tuple(commands)
    drv, _ = double_driver(dialect, "leaf", (), 3999)
    state = drv.observe()
    sent = drv.connection.sent  # type: ignore[attr-defined]
    assert sent == ["".join(f"{c}\n" for c in ["terminal length 0", *commands])]
    ports = {p.port: p for p in state.ports}
    first, second = ("Ethernet1/1", "Ethernet1/2") if dialect == "nxos" else ("Ethernet1", "Ethernet2")
    assert ports[first] == EthernetPortConfig("leaf", first, PortMode.ACCESS, VlanId(100))
    assert ports[second].trunks == vids(200, 201, 202, 300) and ports[second].vlan == VlanId(100)


@pytest.mark.parametrize("dialect", ["nxos", "eos"])
def test_driver_json_read_equals_the_text_read_of_the_same_switch(dialect: str) -> None:
    """The double prints both forms of one state: the two reads agree port for port."""
    from gpufabric.fabrics.ethernet.readers.running_config import parse_running_config

    drv, double = double_driver(dialect, "leaf", ("Ethernet1/11",) if dialect == "nxos" else ("Ethernet7",), 3999)
    text_state = parse_running_config(load_dialect(dialect), double.show(), switch="leaf")  # type: ignore[attr-defined]
    assert drv.observe().ports == text_state.ports


@pytest.mark.parametrize(("dialect", "member", "channel"), [("nxos", "Ethernet1/20", "port-channel10"),
                                                            ("eos", "Ethernet20", "Port-Channel10")])  # fmt: skip
def test_driver_reads_a_member_with_its_channel_then_follows_a_change(dialect: str, member: str, channel: str) -> None:
    indent = "  " if dialect == "nxos" else "   "
    extra = f"interface {member}\n{indent}channel-group 10 mode active\n"
    double = IosDouble(dialect, sample(dialect) + "\n" + extra, (channel,), 3999)
    drv, _ = double_driver(dialect, "leaf", (), 3999)
    drv.connection.double = double  # type: ignore[attr-defined]
    before = {p.port: p for p in drv.observe().ports}
    assert before[member].mode is PortMode.SHUTDOWN  # the channel is provisioned shut
    drv.apply([EthernetPortConfig("leaf", channel, PortMode.TRUNK, None, vids(300, 301))])
    after = {p.port: p for p in drv.observe().ports}
    assert after[member] == EthernetPortConfig("leaf", member, PortMode.TRUNK, None, vids(300, 301))
    assert after[channel] == EthernetPortConfig("leaf", channel, PortMode.TRUNK, None, vids(300, 301))


def test_os10_keeps_the_text_read() -> None:
    drv, _ = double_driver("os10", "leaf", (), 3999)
    drv.observe()
    assert drv.connection.sent[0].splitlines()[-1] == "show running-configuration interface"  # type: ignore[attr-defined]


def test_a_switch_refusing_json_is_read_from_its_text_and_not_asked_again() -> None:
    """An NX-OS release without ``| json`` for these commands answers ``% Invalid command``:
    the driver reads the running-config text instead, and keeps to it."""
    drv, double = double_driver("nxos", "leaf", (), 3999)
    real_command = double.command

    def no_json(line: str):  # type: ignore[no-untyped-def]
        if line.endswith("| json"):
            from support.ssh_double.base import Reply

            return Reply("% Invalid command at '^' marker.\n")
        return real_command(line)

    double.command = no_json  # type: ignore[method-assign]
    first = drv.observe()
    second = drv.observe()
    sent = drv.connection.sent  # type: ignore[attr-defined]
    assert [s.splitlines()[-1] for s in sent] == ["show interface switchport | json", "show running-config interface",
                                                  "show running-config interface"]  # fmt: skip
    assert first == second and first.port("Ethernet1/1") == EthernetPortConfig(
        "leaf", "Ethernet1/1", PortMode.ACCESS, VlanId(100)
    )


def test_nxos_configured_mode_wins_over_the_operational_one() -> None:
    row = {
        "interface": "Ethernet1/5",
        "switchport": "Enabled",
        "admin_mode": "trunk",
        "oper_mode": "down",
        "trunk_vlans": "10",
    }
    (p,) = parse_nxos_json(nxos_answer([], [row]), "leaf1", {})
    assert (p.mode, p.trunks) == (PortMode.TRUNK, vids(10))
