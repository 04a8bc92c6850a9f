"""The ``ironic`` import format (:mod:`gpufabric.workflow.ironic_inventory`) over Ironic's own
answers: tests/fixtures/ironic/two-gpu-nodes.json, recorded from a real Ironic 39.0.0 after the
client's enrollment (its .source.yaml says how). Nodes by Ironic name with their UUIDs, NICs from
``local_link_connection``, the port group as an LACP bond across the MLAG pair, and the ports on a
switch fabrics.yaml does not have or without link information reported, never imported."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.models import FabricPorts, Node, NodeState
from gpufabric.workflow import kind_import
from gpufabric.workflow.ironic_inventory import import_format, nic_name, node_map, parse_listing

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ironic" / "two-gpu-nodes.json"
A01, A02 = "6f1c3a52-8f43-4b9e-9a63-0b5c2a9d0a01", "6f1c3a52-8f43-4b9e-9a63-0b5c2a9d0a02"
LEAVES = [{"driver": "ssh", "options": {"switch": sw, "dialect": "nvue"}} for sw in ("leaf1", "leaf2")]
FABRICS: dict[str, Any] = {"ethernet": LEAVES}


def _read(text: str | None = None, fabrics: dict[str, Any] | None = None, known: tuple[Node, ...] = (),
          instance: str | None = None) -> Any:  # fmt: skip
    fmt = import_format()
    report = kind_import.read(fmt, FIXTURE.read_text() if text is None else text, FABRICS if fabrics is None else fabrics,
                              lambda: known, instance)  # fmt: skip
    return report, kind_import.document("ironic", report, {"added": len(report.inventory.nodes)})


def test_the_recorded_listing_reads_into_nodes_named_by_ironic_with_their_uuids() -> None:
    report, doc = _read()
    assert [n.name for n in report.inventory.nodes] == ["gpu-a01", "gpu-a02"]
    assert doc["identities"] == {"gpu-a01": A01, "gpu-a02": A02}
    assert node_map(doc) == {A01: "gpu-a01", A02: "gpu-a02"}
    assert doc["instance"] == "ethernet"
    ports = {e["name"]: e["ports"] for e in doc["imported"]}
    assert ports["gpu-a01"] == [
        {
            "name": "eth0",
            "switch": "leaf1",
            "switch_port": "swp1",
            "mac": "52:54:00:a1:00:01",
            "bond": "bond1",
            "bond_mode": "lacp",
        },
        {
            "name": "eth1",
            "switch": "leaf2",
            "switch_port": "swp1",
            "mac": "52:54:00:a1:00:02",
            "bond": "bond1",
            "bond_mode": "lacp",
        },
        {"name": "eth2", "switch": "leaf1", "switch_port": "swp11", "mac": "52:54:00:a1:00:03"},
    ]
    assert ports["gpu-a02"] == [
        {"name": "nic-525400a20001", "switch": "leaf1", "switch_port": "swp2", "mac": "52:54:00:a2:00:01"}
    ]


def test_a_port_on_a_switch_fabrics_yaml_lacks_and_one_without_link_information_are_reported() -> None:
    report, doc = _read()
    unmatched = {u["address"]: u for u in doc["unmatched"]}
    assert set(unmatched) == {"52:54:00:a2:00:02", "52:54:00:a2:00:03"}
    spine = unmatched["52:54:00:a2:00:02"]
    assert (spine["node"], spine["node_uuid"], spine["switch_info"], spine["port_id"]) == (
        "gpu-a02",
        A02,
        "spine9",
        "swp30",
    )
    assert "'spine9'" in spine["why"] and "no switch of fabrics.yaml" in spine["why"]
    assert "no local_link_connection" in unmatched["52:54:00:a2:00:03"]["why"]
    assert any(line.startswith("not imported: Ironic port 52:54:00:a2:00:02") for line in report.lines)
    assert all("spine9" not in json.dumps(e["ports"]) for e in doc["imported"])  # never guessed onto a known switch


def test_a_known_node_keeps_its_ports_on_the_other_instances() -> None:
    hca = FabricPorts("infiniband", '[{"guid": "0x0002c90300000001", "device": "mlx5_0"}]')
    known = (Node("gpu-a01", offering="openstack", fabric_ports=(hca,)),)
    report, _ = _read(known=known)
    a01 = report.inventory.node("gpu-a01")
    assert a01 is not None and a01.offering == "openstack"
    assert a01.ports_on("infiniband") == hca
    assert a01.ports_on("ethernet") is not None


def test_a_port_id_its_switch_would_read_otherwise_is_reported() -> None:
    listing = json.loads(FIXTURE.read_text())
    listing["ports"]["ports"][0]["local_link_connection"]["port_id"] = "Ethernet1/1"  # not an NVUE interface
    _, doc = _read(json.dumps(listing))
    why = [u["why"] for u in doc["unmatched"] if u["port_id"] == "Ethernet1/1"]
    assert why and "not a nvue interface name of" in why[0]


def test_switch_id_names_the_switch_when_switch_info_does_not() -> None:
    fabrics = {"ethernet": [*LEAVES, {"driver": "ssh", "options": {"switch": "0c:00:00:00:00:09", "dialect": "nvue"}}]}
    _, doc = _read(fabrics=fabrics)
    assert [u["address"] for u in doc["unmatched"]] == ["52:54:00:a2:00:03"]


def test_a_bond_mode_gpufabric_does_not_manage_is_reported_and_a_nameless_node_too() -> None:
    listing = json.loads(FIXTURE.read_text())
    listing["portgroups"]["portgroups"][0]["mode"] = "balance-rr"
    listing["nodes"]["nodes"][1]["name"] = None
    _, doc = _read(json.dumps(listing))
    whys = sorted(u["why"] for u in doc["unmatched"])
    assert sum("balance-rr" in w for w in whys) == 2
    assert sum("has no usable name" in w for w in whys) == 3  # every port of gpu-a02
    assert doc["identities"] == {"gpu-a01": A01}


def test_without_a_switched_instance_the_import_is_refused() -> None:
    with pytest.raises(ValidationError) as e:
        _read(fabrics={})
    assert "a fabric instance with switches" in str(e.value)


def test_a_listing_that_is_not_ironics_is_refused() -> None:
    for text in ("[]", "{", '{"ports": [{"address": "x"}]}'):
        with pytest.raises(ValidationError):
            parse_listing(text)
    assert parse_listing('{"ports": [{"uuid": "u"}]}').ports == ({"uuid": "u"},)  # a bare list: the objects


@pytest.mark.parametrize(("port", "name"), [
    ({"uuid": "u", "name": "gpu-a01-eth0", "address": "52:54:00:a1:00:01"}, "eth0"),
    ({"uuid": "u", "name": "bmc-eth0", "address": "52:54:00:a1:00:01"}, "bmc-eth0"),
    ({"uuid": "u", "name": "x", "extra": {"nic": "ens1f0"}}, "ens1f0"),
    ({"uuid": "u", "name": None, "address": "52:54:00:A1:00:01"}, "nic-525400a10001"),
])  # fmt: skip
def test_nic_names(port: dict[str, Any], name: str) -> None:
    assert nic_name(port, "gpu-a01") == name


def test_the_fixture_is_the_recorded_one() -> None:
    """The listing is Ironic's own answer, unchanged (its manifest's sha256)."""
    import hashlib

    import yaml

    manifest = yaml.safe_load(FIXTURE.with_name(FIXTURE.name + ".source.yaml").read_text())
    assert hashlib.sha256(FIXTURE.read_bytes()).hexdigest() == manifest["sha256"]
    assert copy.deepcopy(manifest["expected"]["nodes"]) == {"gpu-a01": A01, "gpu-a02": A02}


def test_a_node_ironic_deployed_while_gpufabric_holds_it_in_quarantine_is_reported() -> None:
    doc = json.loads(FIXTURE.read_text())
    nodes = doc["nodes"]["nodes"] if isinstance(doc["nodes"], dict) else doc["nodes"]
    for n in nodes:
        n["provision_state"] = {A01: "active", A02: "clean wait"}[n["uuid"]]
    known = (Node("gpu-a01"), Node("gpu-a02", state=NodeState.LEASED))
    report, out = _read(json.dumps(doc), known=known)
    assert [(d["node"], d["provision_state"], d["gpufabric"]) for d in out["disagree"]] == [
        ("gpu-a01", "active", "available"),
        ("gpu-a02", "clean wait", "leased"),
    ]
    assert "gpu-a01: Ironic deployed it (provision_state active) while gpufabric holds it in quarantine" in report.lines
    # in agreement: nothing reported
    _, quiet = _read(json.dumps(doc), known=(Node("gpu-a01", state=NodeState.LEASED), Node("gpu-a02")))
    assert quiet["disagree"] == []
