"""SSH dialects: golden command sets, running-config parsing, error patterns, validation.

Golden files live in tests/fixtures/ssh/<dialect>/. Regenerate the rendered command
sets with GPUFABRIC_UPDATE_GOLDEN=1 (then review the diff: it IS the test).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.drivers.ssh.dialects import (
    DIALECTS,
    VlanListStyle,
    cli_port,
    dialect_from_dict,
    find_errors,
    load_dialect,
    render_batch,
    render_read,
)
from gpufabric.fabrics.ethernet.readers.running_config import ALL_VLANS, parse_running_config, parse_vlan_list
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState

FIX = Path(__file__).resolve().parents[3] / "fixtures" / "ssh"
Q = VlanId(999)

# four ports per dialect, in each vendor's naming
PORTS = {
    "nxos": ("Ethernet1/1", "Ethernet1/2", "Ethernet1/3", "Ethernet1/4"),
    "eos": ("Ethernet1", "Ethernet2", "Ethernet3", "Ethernet4"),
    "junos": ("ge-0/0/1", "ge-0/0/2", "ge-0/0/3", "ge-0/0/4"),
    "os10": ("ethernet1/1/1", "ethernet1/1/2", "ethernet1/1/3", "ethernet1/1/4"),
    "os9": ("TenGigabitEthernet0/1", "TenGigabitEthernet0/2", "TenGigabitEthernet0/3", "TenGigabitEthernet0/4"),
    "sonic": ("Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"),
    "nvue": ("swp1", "swp2", "swp3", "swp4"),
    "ovs": ("p01", "p02", "p03", "p04"),
}
CONFIG_FILE = {
    "nxos": "running-config.txt",
    "eos": "running-config.txt",
    "junos": "running-config.txt",
    "os10": "running-config.txt",
    "os9": "running-config.txt",
    "sonic": "running-config.json",
    "nvue": "running-config.json",
    "ovs": "running-config.json",
}


def v(*ns: int) -> tuple[VlanId, ...]:
    return tuple(VlanId(n) for n in ns)


def batch(dialect: str) -> list[EthernetPortConfig]:
    """The fixed batch: trunk with native, access, shutdown, trunk without native."""
    p1, p2, p3, p4 = PORTS[dialect]
    return [
        EthernetPortConfig("sw", p1, PortMode.TRUNK, VlanId(100), v(200, 300)),
        EthernetPortConfig("sw", p2, PortMode.ACCESS, VlanId(100)),
        EthernetPortConfig("sw", p3, PortMode.SHUTDOWN),
        EthernetPortConfig("sw", p4, PortMode.TRUNK, None, v(400, 401, 402)),
    ]


def running_config(dialect: str) -> str:
    return (FIX / dialect / CONFIG_FILE[dialect]).read_text()


def pretty(commands: tuple[str, ...]) -> str:
    """One command per line; a ' -- '-joined single command is shown one piece per line."""
    return "".join(c.replace(" -- ", " \\\n    -- ") + "\n" for c in commands)


# --------------------------------------------------------------------------- golden render
@pytest.mark.parametrize("name", DIALECTS)
def test_rendered_batch_matches_golden(name: str) -> None:
    d = load_dialect(name)
    current = parse_running_config(d, running_config(name), switch="sw", quarantine=Q) if d.needs_current else None
    got = pretty(render_batch(d, batch(name), quarantine=Q, current=current))
    golden = FIX / name / "batch.commands"
    if os.environ.get("GPUFABRIC_UPDATE_GOLDEN"):
        golden.write_text(got)
    assert got == golden.read_text()


@pytest.mark.parametrize("name", DIALECTS)
def test_render_is_stable_and_mentions_every_port(name: str) -> None:
    d = load_dialect(name)
    current = parse_running_config(d, running_config(name), switch="sw", quarantine=Q) if d.needs_current else None
    a = render_batch(d, batch(name), quarantine=Q, current=current)
    b = render_batch(d, batch(name), quarantine=Q, current=current)
    assert a == b
    text = "\n".join(a)
    for port in PORTS[name]:
        assert cli_port(d, port) in text  # the CLI's spelling (OS9: "TenGigabitEthernet 0/1")


def test_ovs_batch_is_one_invocation_with_a_custom_prefix() -> None:
    d = load_dialect("ovs").with_variables(vsctl="ovs-vsctl --db=unix:/x/db.sock")
    cmds = render_batch(d, batch("ovs"), quarantine=Q)
    assert len(cmds) == 1
    assert cmds[0].startswith("ovs-vsctl --db=unix:/x/db.sock --timeout=30 -- set port p01 ")
    assert cmds[0].count(" -- set port ") == 4
    assert render_read(d)[0].startswith("ovs-vsctl --db=unix:/x/db.sock --timeout=30 --format=json")


def test_sonic_skips_existing_memberships_and_removes_stale_ones() -> None:
    d = load_dialect("sonic")
    current = parse_running_config(d, running_config("sonic"), switch="sw", quarantine=Q)
    cmds = render_batch(d, batch("sonic"), quarantine=Q, current=current)
    # Ethernet4 was trunk 100+{200,201,202,300}: becomes access 100 -> tagged removed, untagged kept
    assert [c for c in cmds if "Ethernet4" in c and "member" in c] == [
        f"sudo config vlan member del {n} Ethernet4" for n in (200, 201, 202, 300)
    ]
    # Ethernet12 had tagged 400: only 401 and 402 are added
    assert [c for c in cmds if "Ethernet12" in c and "member add" in c] == [
        "sudo config vlan member add 401 Ethernet12",
        "sudo config vlan member add 402 Ethernet12",
    ]


def test_needs_current_is_enforced() -> None:
    with pytest.raises(ValidationError) as e:
        render_batch(load_dialect("os10"), batch("os10"), quarantine=Q)
    assert e.value.field == "current"


# --------------------------------------------------------------------------- parsing
def cfg(port: str, mode: PortMode, vlan: int | None = None, trunks: tuple[int, ...] = ()) -> EthernetPortConfig:
    return EthernetPortConfig("sw", port, mode, VlanId(vlan) if vlan is not None else None, v(*trunks))


ALL_BUT_1 = tuple(n.value for n in ALL_VLANS if n.value != 1)

EXPECTED: dict[str, list[EthernetPortConfig]] = {
    "nxos": [
        cfg("Ethernet1/1", PortMode.ACCESS, 100),
        cfg("Ethernet1/2", PortMode.TRUNK, 100, (200, 201, 202, 300)),
        cfg("Ethernet1/3", PortMode.SHUTDOWN),
        cfg("Ethernet1/4", PortMode.TRUNK, None, (400,)),
        cfg("Ethernet1/5", PortMode.TRUNK, 1, ALL_BUT_1),
        cfg("Ethernet1/10", PortMode.ACCESS, 1),
    ],
    "eos": [
        cfg("Ethernet1", PortMode.ACCESS, 100),
        cfg("Ethernet2", PortMode.TRUNK, 100, (200, 201, 202, 300)),
        cfg("Ethernet3", PortMode.SHUTDOWN),
        cfg("Ethernet4", PortMode.TRUNK, None, (400,)),
        cfg("Ethernet5", PortMode.ACCESS, 1),
    ],
    "junos": [
        cfg("ge-0/0/1", PortMode.ACCESS, 100),
        cfg("ge-0/0/2", PortMode.TRUNK, 100, (200, 201, 202, 300)),
        cfg("ge-0/0/3", PortMode.SHUTDOWN),
        cfg("ge-0/0/4", PortMode.TRUNK, None, (400,)),
        cfg("ge-0/0/5", PortMode.ACCESS, 1),
    ],
    "os10": [
        cfg("ethernet1/1/1", PortMode.ACCESS, 100),
        cfg("ethernet1/1/2", PortMode.TRUNK, 100, (200, 201, 202, 300)),
        cfg("ethernet1/1/3", PortMode.SHUTDOWN),
        cfg("ethernet1/1/4", PortMode.TRUNK, None, (400,)),
        cfg("ethernet1/1/5", PortMode.ACCESS, 1),
    ],
    "os9": [
        cfg("TenGigabitEthernet0/1", PortMode.ACCESS, 100),
        cfg("TenGigabitEthernet0/2", PortMode.TRUNK, 100, (200, 201, 202, 300)),
        cfg("TenGigabitEthernet0/3", PortMode.SHUTDOWN),
        cfg("TenGigabitEthernet0/4", PortMode.TRUNK, None, (400,)),
        cfg("TenGigabitEthernet0/5", PortMode.ACCESS, 1),
    ],
    "sonic": [
        cfg("Ethernet0", PortMode.ACCESS, 100),
        cfg("Ethernet4", PortMode.TRUNK, 100, (200, 201, 202, 300)),
        cfg("Ethernet8", PortMode.SHUTDOWN),
        cfg("Ethernet12", PortMode.TRUNK, None, (400,)),
        cfg("Ethernet20", PortMode.SHUTDOWN),
    ],
    "nvue": [
        cfg("swp1", PortMode.ACCESS, 100),
        cfg("swp2", PortMode.TRUNK, 100, (200, 201, 202, 300)),
        cfg("swp3", PortMode.SHUTDOWN),
        cfg("swp4", PortMode.TRUNK, None, (400,)),
        cfg("swp5", PortMode.TRUNK, 1, (100, 200, 201, 202, 300, 400, 999)),
        cfg("swp6", PortMode.TRUNK, 1, (100, 200, 201, 202, 300, 400, 999)),
    ],
    "ovs": [  # recorded from a real ovs-vsctl 3.1 (bridges br0 and br-ext)
        cfg("p01", PortMode.ACCESS, 100),
        cfg("p02", PortMode.TRUNK, 100, (200, 201, 202, 300)),
        cfg("p03", PortMode.SHUTDOWN),
        cfg("p04", PortMode.TRUNK, None, (400,)),
        cfg("p05", PortMode.TRUNK, None, tuple(n.value for n in ALL_VLANS)),
        cfg("p06", PortMode.ACCESS, 120),
        cfg("uplink0", PortMode.TRUNK, None, (100, 200)),
    ],
}


@pytest.mark.parametrize("name", DIALECTS)
def test_parse_recorded_running_config(name: str) -> None:
    state = parse_running_config(load_dialect(name), running_config(name), switch="sw", quarantine=Q)
    assert state.switch == "sw"
    assert list(state.ports) == EXPECTED[name]


@pytest.mark.parametrize("name", DIALECTS)
def test_parse_skips_routed_management_and_vlan_interfaces(name: str) -> None:
    state = parse_running_config(load_dialect(name), running_config(name), switch="sw", quarantine=Q)
    names = {p.port for p in state.ports}
    for absent in ("mgmt0", "Management1", "mgmt1/1/1", "eth0", "lo", "lo0", "Vlan100", "vlan100", "irb", "br0", "ManagementEthernet1/1"):
        assert absent not in names
    for routed in ("Ethernet1/49", "Ethernet32/1", "xe-0/0/48", "ethernet1/1/54", "Ethernet16", "swp51", "fortyGigE0/48"):
        assert routed not in names


def test_ovs_bridge_filter_and_quarantine() -> None:
    d = load_dialect("ovs")
    only_br0 = parse_running_config(d, running_config("ovs"), switch="sw", quarantine=Q, bridge="br0")
    assert [p.port for p in only_br0.ports] == ["p01", "p02", "p03", "p04", "p05", "p06"]
    no_q = parse_running_config(d, running_config("ovs"), switch="sw", quarantine=None)
    assert no_q.port("p03") == cfg("p03", PortMode.ACCESS, 999)
    other_q = parse_running_config(d, running_config("ovs"), switch="sw", quarantine=VlanId(998))
    assert other_q.port("p03") == cfg("p03", PortMode.ACCESS, 999)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1-3,7", {1, 2, 3, 7}),
        ("[ 10 12-13 ]", {10, 12, 13}),
        ("none", set()),
        ("", set()),
        ("4094", {4094}),
    ],
    ids=["comma-range", "junos-brackets", "none", "empty", "max"],
)
def test_parse_vlan_list(text: str, expected: set[int]) -> None:
    assert parse_vlan_list(text) == expected


def test_parse_vlan_list_all_and_garbage() -> None:
    assert len(parse_vlan_list("all")) == 4094
    with pytest.raises(ValidationError):
        parse_vlan_list("10,abc")


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        (VlanListStyle(","), "200-202,300"),
        (VlanListStyle(",", ranges=False), "200,201,202,300"),
        (VlanListStyle(" ", wrap="[ {} ]"), "[ 200-202 300 ]"),
    ],
    ids=["ranges", "no-ranges", "junos"],
)
def test_vlan_list_style(style: VlanListStyle, expected: str) -> None:
    assert style.format([300, 201, 200, 202, 201]) == expected


# --------------------------------------------------------------------------- error patterns
ERROR_SAMPLES = {
    "nxos": "% Invalid command at '^' marker.",
    "eos": "% Invalid input (at token 2: 'vlan')",
    "junos": "error: configuration check-out failed",
    "os10": "% Error: Invalid VLAN ID 5000",
    "os9": "% Error: Port is untagged in another Vlan.",
    "sonic": "Error: Vlan400 doesn't exist",
    "nvue": "Error: Invalid value '5000' for vlan",
    "ovs": 'ovs-vsctl: no row "p99" in table Port',
}
BENIGN = {
    "nxos": "Copy complete, now saving to disk (please wait)...",
    "eos": "Copy completed successfully.",
    "junos": "warning: statement not found",
    "os10": "OS10(config-if-eth1/1/1)#",
    "os9": "Dell(conf-if-vl-100)#",
    "sonic": "Running command: /usr/local/bin/sonic-cfggen -d --print-data",
    "nvue": "applied [rev_id: 12]",
    "ovs": "",
}


@pytest.mark.parametrize("name", DIALECTS)
def test_error_patterns(name: str) -> None:
    d = load_dialect(name)
    assert find_errors(d, f"some output\n{ERROR_SAMPLES[name]}\nmore") == [ERROR_SAMPLES[name]]
    assert find_errors(d, BENIGN[name]) == []


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "change",
    [
        EthernetPortConfig("sw", "p1", PortMode.ACCESS, None),
        EthernetPortConfig("sw", "p1", PortMode.ACCESS, VlanId(10), v(20)),
        EthernetPortConfig("sw", "p1", PortMode.TRUNK, VlanId(10), ()),
        EthernetPortConfig("sw", "p1;reboot", PortMode.ACCESS, VlanId(10)),
        EthernetPortConfig("sw", "p1 -- del-br br0", PortMode.ACCESS, VlanId(10)),
        EthernetPortConfig("sw", "p1", PortMode.ACCESS, VlanId(1)),
        EthernetPortConfig("sw", "p1", PortMode.TRUNK, VlanId(1), v(20)),
        EthernetPortConfig("sw", "p1", PortMode.TRUNK, None, v(1, 20)),
        EthernetPortConfig("sw", "p1", PortMode.ACCESS, Q),
        EthernetPortConfig("sw", "p1", PortMode.SHUTDOWN, VlanId(10)),
    ],
    ids=[
        "access-without-vlan",
        "access-with-trunks",
        "trunk-without-vlans",
        "semicolon-in-port",
        "injection-in-port",
        "access-vlan-1",
        "native-vlan-1",
        "trunk-vlan-1",
        "access-quarantine",
        "shutdown-with-vlan",
    ],
)
@pytest.mark.parametrize("name", DIALECTS)
def test_invalid_changes_are_rejected(name: str, change: EthernetPortConfig) -> None:
    with pytest.raises(ValidationError):
        render_batch(load_dialect(name), [change], quarantine=Q, current=SwitchState("sw"))


def test_empty_batch_renders_nothing() -> None:
    assert render_batch(load_dialect("nxos"), [], quarantine=Q) == ()


@pytest.mark.parametrize(
    "data",
    [
        {"name": "x", "transport": "telnet"},
        {"name": "x", "transport": "exec", "templates": {"acess": "typo"}},
        {"name": "x", "transport": "exec", "errors": ["("]},
    ],
    ids=["bad-transport", "unknown-template", "bad-regex"],
)
def test_bad_dialect_data_is_rejected(data: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        dialect_from_dict(data)


def test_unknown_dialect() -> None:
    with pytest.raises(ValidationError) as e:
        load_dialect("ios-xr")
    assert "nxos" in e.value.allowed


def test_state_helper() -> None:
    s = SwitchState("sw", (cfg("a", PortMode.ACCESS, 5),))
    assert s.port("a") == cfg("a", PortMode.ACCESS, 5)


# a name each dialect's CLI would read as something else (a range, another vendor's name)
FOREIGN = {"nxos": "Ethernet1/1-48", "eos": "Ethernet1-48", "junos": "ge-0/0/1-48", "os10": "ethernet1/1/1-1/1/48",
           "os9": "TenGigabitEthernet0/1-48", "sonic": "Ethernet0-47", "nvue": "swp1-48", "ovs": "a-port-name-past-15"}


@pytest.mark.parametrize("name", DIALECTS)
def test_the_renderer_refuses_a_port_name_its_dialect_refuses(name: str) -> None:
    """The renderer checks each port (and a member's aggregate) with its dialect's naming, as the
    inventory does: a name that passed some other way in (issue 31: the API took Ethernet1/1-48
    for an NX-OS switch) never becomes ``interface Ethernet1/1-48``."""
    d = load_dialect(name)
    assert d.port_naming is not None and not d.port_naming.matches(FOREIGN[name])
    bad = EthernetPortConfig("sw", FOREIGN[name], PortMode.ACCESS, VlanId(100))
    with pytest.raises(ValidationError) as e:
        render_batch(d, [*batch(name)[:1], bad], quarantine=Q, current=SwitchState("sw"))
    assert (e.value.field, e.value.value) == ("port", FOREIGN[name])
    assert e.value.allowed.startswith(f"a {name} interface name, e.g. ")
    assert render_batch(d, batch(name)[:1], quarantine=Q, current=SwitchState("sw"))  # its own names render


def test_the_renderer_refuses_an_aggregate_its_dialect_refuses() -> None:
    member = EthernetPortConfig("sw", "Ethernet1/3", PortMode.ACCESS, VlanId(100), bond="port-channel1-4")
    with pytest.raises(ValidationError) as e:
        render_batch(load_dialect("nxos"), [member], quarantine=Q, current=SwitchState("sw"))
    assert (e.value.field, e.value.value) == ("bond", "port-channel1-4")
