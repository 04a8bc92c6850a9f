"""``inventory import --from ironic``'s reader (:mod:`gpufabric.workflow.ironic_inventory`) over
Ironic's own published answers: the API reference samples of openstack/ironic
(tests/fixtures/real/ironic, Apache-2.0, each with its manifest: source URL, commit, sha256 and
the reading written by hand). The three listings read together: both nodes named by Ironic with
their UUIDs; ``port1`` (``switch1`` ``Ethernet3/1``) is reported while its port group's name
(``test_portgroup``) is no aggregate name of the switch, and is the active-backup bond's member
once the group's ``extra.switch_bond`` names one; against a fabrics.yaml without ``switch1`` it
is reported too."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from gpufabric.workflow import kind_import
from gpufabric.workflow.ironic_inventory import import_format

from support.real_outputs import REAL, Manifest, manifests, real_output

IRONIC = manifests("ironic")
SWITCH1 = {"ethernet": [{"driver": "ssh", "options": {"switch": "switch1", "dialect": "eos"}}]}
OTHER = {"ethernet": [{"driver": "ssh", "options": {"switch": "leaf1", "dialect": "eos"}}]}


def _listing() -> str:
    by = {m.expected["listing"]: json.loads(real_output(m)) for m in IRONIC}
    return json.dumps(by)  # {"nodes": {"nodes": [...]}, ...}: the API's bodies as Ironic answers them


def _read(fabrics: dict[str, Any]) -> dict[str, Any]:
    report = kind_import.read(import_format(), _listing(), fabrics, lambda: ())
    return {"report": report, **kind_import.document("ironic", report, {})}


def test_the_samples_are_the_recorded_ones() -> None:
    assert sorted(m.expected["listing"] for m in IRONIC) == ["nodes", "portgroups", "ports"]
    for m in IRONIC:
        assert m.doc["license"] == "Apache-2.0" and m.doc["repo"] == "openstack/ironic" and len(m.doc["commit"]) == 40
        assert m.doc["source_url"].endswith(m.doc["path"]) and m.doc["commit"] in m.doc["source_url"]
        assert hashlib.sha256((REAL / m.parser / m.file).read_bytes()).hexdigest() == m.doc["sha256"], m.id
        assert (REAL / "LICENSES" / "openstack__ironic.txt").read_text().lstrip().startswith("Apache License")


@pytest.mark.parametrize("m", IRONIC, ids=[m.file for m in IRONIC])
def test_each_sample_holds_what_its_manifest_says(m: Manifest) -> None:
    doc = json.loads(real_output(m))
    kind, exp = m.expected["listing"], m.expected
    items = {x["uuid"]: x for x in doc[kind]}
    if kind == "nodes":
        got = {n["name"]: {"uuid": n["uuid"], "provision_state": n["provision_state"],
                           "network_interface": n["network_interface"]} for n in items.values()}  # fmt: skip
        assert got == exp["nodes"]
    elif kind == "ports":
        got = {u: {k: p[k] for k in exp["ports"][u]} for u, p in items.items()}
        assert got == exp["ports"]
    else:
        assert {u: {k: g[k] for k in ("name", "mode", "node_uuid")} for u, g in items.items()} == exp["portgroups"]


def test_the_samples_read_into_nodes_named_by_ironic_with_their_uuids() -> None:
    """The sample's port group is named ``test_portgroup``, no switch aggregate: its member is
    reported (set the group's extra.switch_bond), not imported under a name the switch lacks
    (found on this sample: the reader refused the whole listing before)."""
    out = _read(SWITCH1)
    assert out["identities"] == {
        "test_node_classic": "6d85703a-565d-469a-96ce-30b6de53079d",
        "test_node_dynamic": "2b045129-a906-46af-bc1a-092b294b3428",
    }
    assert out["disagree"] == []
    assert [(u["uuid"], u["switch_info"], u["port_id"]) for u in out["unmatched"]] == [
        ("d2b30520-907d-46c8-bfee-c5586e6fb3a1", "switch1", "Ethernet3/1")
    ]
    assert (
        "'test_portgroup' (its extra.switch_bond, else its name) is not a eos aggregate name of switch1"
        in (out["unmatched"][0]["why"])
    )
    assert {e["name"]: e["ports"] for e in out["imported"]} == {"test_node_classic": [], "test_node_dynamic": []}
    inv = out["report"].inventory
    assert dict(inv.host_ids) == out["identities"]  # stored as the nodes' host ids
    assert [n.name for n in inv.nodes] == ["test_node_classic", "test_node_dynamic"]


def test_with_the_switch_bond_set_the_port_is_the_bonds_member() -> None:
    listing = json.loads(_listing())
    listing["portgroups"]["portgroups"][0]["extra"] = {"switch_bond": "Port-Channel10"}
    report = kind_import.read(import_format(), json.dumps(listing), SWITCH1, lambda: ())
    out = kind_import.document("ironic", report, {})
    assert out["unmatched"] == []
    assert {e["name"]: e["ports"] for e in out["imported"]}["test_node_classic"] == [
        {"name": "port1", "switch": "switch1", "switch_port": "Ethernet3/1", "mac": "11:11:11:11:11:11",
         "bond": "Port-Channel10", "bond_mode": "active-backup"}
    ]  # fmt: skip


def test_a_switch_fabrics_yaml_lacks_is_reported() -> None:
    out = _read(OTHER)
    assert [(u["uuid"], u["node"], u["switch_info"], u["port_id"]) for u in out["unmatched"]] == [
        ("d2b30520-907d-46c8-bfee-c5586e6fb3a1", "test_node_classic", "switch1", "Ethernet3/1")
    ]
    assert "no switch of fabrics.yaml" in out["unmatched"][0]["why"]
