"""Dell OS9 (FTOS) running configs from public repositories, read against the expected readings
written by hand in their manifests (tests/fixtures/real/ethernet/os9/*.source.yaml): an MXL 9.5
with hybrid ports and an LACP port-channel, an I/O Aggregator stating VLANs on its ports, an S6000
9.12 (GPL-3.0: its file is not committed, the case skips without it).

The ``test_regression_*`` cases fail on bac21d2, which had no OS9 dialect (``load_dialect("os9")``
refused); the nearest, OS10's IOS-like reading, sees none of the VLAN blocks' memberships.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpufabric.fabrics.ethernet.drivers.ssh.dialects import load_dialect
from gpufabric.fabrics.ethernet.readers.running_config import parse_os9_bonds, parse_running_config, parse_vlan_list
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode

from support.real_outputs import Manifest, manifest, manifests, real_output

OS9 = manifests("ethernet/os9")


def _read(m: Manifest) -> dict[str, EthernetPortConfig]:
    st = parse_running_config(load_dialect("os9"), real_output(m), switch="sw")
    return {p.port: p for p in st.ports}


def test_the_os9_corpus_has_every_output_found() -> None:
    assert {m.file for m in OS9} == {
        "dellasm-mxl-9.5-running-config.txt",
        "dellasm-ioa-show-run-interface.txt",
        "ansible-os9-s6000.txt",
    }
    for m in OS9:
        assert len(m.doc["commit"]) == 40 and m.doc["dialect"] == "os9", m.id


@pytest.mark.parametrize("m", OS9, ids=[m.file for m in OS9])
def test_os9_running_configs_are_read_as_the_switch_applies_them(m: Manifest) -> None:
    exp: dict[str, Any] = m.expected
    ports = _read(m)
    assert len(ports) == exp["ports"]
    for name, e in exp["entries"].items():
        p = ports[name]
        assert p.mode is PortMode(e["mode"]), (name, p)
        if p.mode is not PortMode.SHUTDOWN:
            assert (p.vlan.value if p.vlan else None) == e["vlan"], (name, p)
            want = set(parse_vlan_list(str(e["vlans"]))) if "vlans" in e else {e["vlan"]}
            assert p.vlans() == want, name
    for name in exp["absent"]:
        assert name not in ports, (name, ports.get(name))
    bonds = {b.port: b for b in parse_os9_bonds(real_output(m))}
    assert {k: {"bond": b.bond, "lacp_mode": b.lacp_mode} for k, b in bonds.items() if k in exp["bonds"]} == exp[
        "bonds"
    ]


def test_regression_os9_hybrid_ports_carry_the_vlans_their_vlan_blocks_list() -> None:
    """The MXL's hybrid TenGigabitEthernet 0/2 is untagged in Vlan 22 and tagged in 16/20/23/24:
    its membership is on the VLAN blocks, none on the port."""
    ports = _read(manifest("ethernet/os9", "dellasm-mxl-9.5-running-config.txt"))
    assert ports["TenGigabitEthernet0/2"].mode is PortMode.TRUNK
    assert ports["TenGigabitEthernet0/2"].vlans() == {16, 20, 22, 23, 24}


def test_regression_os9_lacp_members_carry_the_port_channels_vlans() -> None:
    """The members of Port-channel 128 say only ``port-channel 128 mode active``: they carry
    the port-channel's tagged VLANs, not access VLAN 1."""
    ports = _read(manifest("ethernet/os9", "dellasm-mxl-9.5-running-config.txt"))
    for member in ("TenGigabitEthernet0/41", "TenGigabitEthernet0/42"):
        assert ports[member].mode is PortMode.TRUNK and ports[member].vlan is None
        assert ports[member].vlans() == {17, 18, 20, 21, 22, 23, 24, 25}
