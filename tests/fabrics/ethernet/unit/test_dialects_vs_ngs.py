"""Each vendor dialect against what networking-generic-switch (NGS) sends for the same change.

tests/fixtures/ngs/ngs-commands.yaml records NGS's command templates (Apache-2.0, with the
commit they were read at). For four changes (add network; plug a port as access; unplug it;
plug a bond as access) the NGS lines are formatted as NGS's ``NetmikoSwitch`` methods do, with
NGS configured the way gpufabric behaves (``ngs_port_default_vlan`` = the quarantine VLAN,
``ngs_disable_inactive_ports``); gpufabric's lines are ``render_batch`` of the same change without
the session framing (``begin``/``end``: netmiko enters config mode and saves on its own). The
line sets must differ by exactly the lines the fixture lists, each with its reason: a new
difference, or one that went away, fails here and has to be explained in the fixture and in
docs/ethernet-dialects-vs-ngs.md.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.drivers.ssh.dialects import (
    Dialect,
    cli_port,
    find_errors,
    load_dialect,
    render_batch,
    render_lines,
)
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState

FIX = Path(__file__).resolve().parents[3] / "fixtures" / "ngs"
SCENARIOS = ("add_network", "plug_port", "unplug_port", "plug_bond")


@cache
def ngs() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((FIX / "ngs-commands.yaml").read_text())
    return doc


VENDORS = tuple(ngs()["vendors"])


def _fmt(templates: list[str] | None, **kw: str) -> list[str]:
    return [t.format(**kw) for t in templates or []]


def ngs_lines(vendor: str, scenario: str) -> set[str]:
    """NGS's commands, in the order of its NetmikoSwitch methods (add_network, plug_port_to_network,
    delete_port, plug_bond_to_network), with a default VLAN and disable_inactive_ports."""
    v, s = ngs()["vendors"][vendor], ngs()["settings"]
    d = load_dialect(vendor)
    seg, park = str(s["vlan"]), str(s["port_default_vlan"])
    port, bond = cli_port(d, v["port"]), cli_port(d, v["bond"])

    def plug(p: str) -> list[str]:
        out = _fmt(v.get("ENABLE_PORT"), port=p)
        out += _fmt(v["DELETE_PORT"], port=p, segmentation_id=park)
        return out + _fmt(v["PLUG_PORT_TO_NETWORK"], port=p, segmentation_id=seg)

    if scenario == "add_network":
        out = _fmt(v["ADD_NETWORK"], segmentation_id=seg, network_name=s["network_name"])
    elif scenario == "plug_port":
        out = plug(port)
    elif scenario == "unplug_port":
        out = _fmt(v["DELETE_PORT"], port=port, segmentation_id=seg)
        out += _fmt(v["ADD_NETWORK"], segmentation_id=park, network_name=f"net{park}")
        out += _fmt(v["PLUG_PORT_TO_NETWORK"], port=port, segmentation_id=park)
        out += _fmt(v.get("DISABLE_PORT"), port=port)
    elif v.get("PLUG_BOND_TO_NETWORK"):  # plug_bond with the vendor's own bond commands
        out = _fmt(v.get("ENABLE_BOND"), bond=bond)
        out += _fmt(v["UNPLUG_BOND_FROM_NETWORK"], bond=bond, segmentation_id=park)
        out += _fmt(v["PLUG_BOND_TO_NETWORK"], bond=bond, segmentation_id=seg)
    else:  # NGS falls back to plug_port_to_network on the bond
        out = plug(bond)
    return {line.strip() for line in out}


def _body(d: Dialect, lines: tuple[str, ...]) -> set[str]:
    framing = {x.strip() for x in (*render_lines(d, "begin"), *render_lines(d, "end"))}
    return {x.strip() for x in lines} - framing


def our_lines(vendor: str, scenario: str) -> set[str]:
    v, s = ngs()["vendors"][vendor], ngs()["settings"]
    d = load_dialect(vendor)
    q, vlan = VlanId(int(s["port_default_vlan"])), VlanId(int(s["vlan"]))
    if scenario == "add_network":
        kw = {**d.variables, "vlan": str(vlan.value), "vlans": str(vlan.value), "quarantine": str(q.value)}
        return {x.format(**kw).strip() for x in (*d.lines("ensure_vlans"), *d.lines("ensure_vlan"))}
    port = v["bond"] if scenario == "plug_bond" else v["port"]
    parked = EthernetPortConfig("leaf", port, PortMode.SHUTDOWN)
    plugged = EthernetPortConfig("leaf", port, PortMode.ACCESS, vlan)
    before, after = (plugged, parked) if scenario == "unplug_port" else (parked, plugged)
    current = SwitchState("leaf", (before,))
    return _body(d, render_batch(d, [after], quarantine=q, current=current))


def _listed(vendor: str, scenario: str, side: str) -> dict[str, str]:
    diffs = (ngs().get("differences") or {}).get(vendor, {}).get(scenario, {})
    return dict(diffs.get(side) or {})


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("vendor", VENDORS)
def test_dialect_differs_from_ngs_only_as_listed(vendor: str, scenario: str) -> None:
    ours, theirs = our_lines(vendor, scenario), ngs_lines(vendor, scenario)
    assert ours, f"{vendor} renders nothing for {scenario}"
    assert theirs or scenario == "add_network" or vendor == "sonic", f"NGS sends nothing for {vendor} {scenario}"
    assert sorted(ours - theirs) == sorted(_listed(vendor, scenario, "only_ours")), "lines only gpufabric sends"
    assert sorted(theirs - ours) == sorted(_listed(vendor, scenario, "only_ngs")), "lines only NGS sends"


def test_every_listed_difference_has_a_reason_and_every_vendor_is_compared() -> None:
    assert set(VENDORS) == {"nxos", "eos", "junos", "os10", "os9", "nvue", "sonic"}
    assert len(ngs()["commit"]) == 40 and ngs()["license"] == "Apache-2.0"
    assert (FIX / "LICENSE.networking-generic-switch.txt").read_text().lstrip().startswith("Apache License")
    for vendor in VENDORS:
        for scenario in SCENARIOS:
            for side in ("only_ours", "only_ngs"):
                for line, why in _listed(vendor, scenario, side).items():
                    assert isinstance(why, str) and len(why) > 15, (vendor, scenario, line)


@pytest.mark.parametrize("vendor", sorted(ngs()["errors"]))
def test_what_ngs_calls_an_error_the_dialect_does_too(vendor: str) -> None:
    """bac21d2's nvue dialect took NVUE's "Invalid config" / "Config invalid at" / "command not
    found" / "not a physical interface" for success (NGS's CumulusNVUE matches them)."""
    d = load_dialect(vendor)
    for line in ngs()["errors"][vendor]:
        assert find_errors(d, f"ok\n{line}\nmore") == [line], (vendor, line)


def test_common_lines_are_the_plug_itself() -> None:
    """What both send for a plug is the vendor's access assignment: the comparison compares
    like with like (a renamed port or VLAN would make every line a difference)."""
    core = {
        "nxos": "switchport access vlan 101",
        "eos": "switchport access vlan 101",
        "junos": "set interfaces ge-0/0/7 unit 0 family ethernet-switching vlan members 101",
        "os10": "switchport access vlan 101",
        "os9": "untagged TenGigabitEthernet 0/7",
        "nvue": "nv set interface swp7 bridge domain br_default access 101",
    }
    for vendor, line in core.items():
        assert line in our_lines(vendor, "plug_port") & ngs_lines(vendor, "plug_port"), vendor


if __name__ == "__main__":  # print the current differences, to write their reasons into the fixture
    for vendor in VENDORS:
        print(f"  {vendor}:")
        for scenario in SCENARIOS:
            o, t = our_lines(vendor, scenario), ngs_lines(vendor, scenario)
            print(f"    {scenario}:\n      only_ours: {sorted(o - t)}\n      only_ngs: {sorted(t - o)}")
