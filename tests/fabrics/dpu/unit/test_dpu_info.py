"""DPU inventory view: defaults, validation errors naming the field and the allowed values,
and the inventory importer reading a node's ``dpus:`` through the DPU kind."""

from __future__ import annotations

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.models import Node
from gpufabric.fabrics.dpu.entries import Dpu, DpuMode, dpu_ports
from gpufabric.fabrics.dpu.entries.info import DpuInfo, dpu_inventory, node_dpu, node_dpus
from gpufabric.fabrics.dpu.plan.sriov import sriov_policy
from gpufabric.workflow.inventory import parse_inventory


def _dpu(**d: str) -> Dpu:
    return Dpu("gpu-a01", "bf0", DpuMode.DPU, tuple(sorted(d.items())))


def test_defaults() -> None:
    info = DpuInfo.from_dpu(_dpu())
    assert (info.dpu_node, info.pf, info.vfs, info.mgmt_vf, info.representors) == (
        "gpu-a01-bf0", "ens1f0", 8, "ens1f0v0", ("pf0vf1",)
    )


def test_all_details() -> None:
    info = DpuInfo.from_dpu(
        _dpu(dpu_node="bf-a01", pf="ens2f0", vfs="16", mgmt_vf="ens2f0v0", representors="pf0vf1,pf0vf2",
             nic_model="BlueField-3", ovsdb="tcp:192.0.2.11:6640", gw_interface="p0", gw_nexthop="192.0.2.1")
    )
    assert info.representors == ("pf0vf1", "pf0vf2")
    assert (info.vfs, info.nic_model, info.ovsdb, info.gw_nexthop) == (16, "BlueField-3", "tcp:192.0.2.11:6640", "192.0.2.1")


@pytest.mark.parametrize(
    ("details", "field", "allowed"),
    [
        ({"vfs": "1"}, "vfs", "2-1024"),
        ({"vfs": "x"}, "vfs", "2-1024"),
        ({"representors": "pf0vf0"}, "representors", "other than VF 0"),
        ({"representors": " , "}, "representors", "one or more"),
        ({"representors": "pf0vf1,pf0vf1"}, "representors", "distinct"),
        ({"pf": "a-very-long-netdev-name"}, "pf", "1-15 chars"),
        ({"ovsdb": "192.0.2.1:6640"}, "ovsdb", "tcp:HOST:PORT"),
        ({"gw_nexthop": "gateway"}, "gw_nexthop", "IPv4 or IPv6"),
        ({"dpu_node": "gpu-a01"}, "dpu_node", "other than the host"),
        ({"colour": "red"}, "colour", "known keys only"),
    ],
    ids=["vfs-too-few", "vfs-not-number", "vf0-representor", "no-representor", "duplicate-representor",
         "long-pf", "bad-remote", "bad-nexthop", "dpu-node-is-host", "unknown-key"],
)
def test_bad_details_name_field_and_allowed(details: dict[str, str], field: str, allowed: str) -> None:
    with pytest.raises(ValidationError) as e:
        DpuInfo.from_dpu(_dpu(**details))
    assert e.value.field.endswith(f".{field}")
    assert allowed in e.value.allowed


def test_two_dpus_on_a_node_are_refused() -> None:
    n = Node("gpu-a01", fabric_ports=dpu_ports(Dpu("gpu-a01", "bf0"), Dpu("gpu-a01", "bf1")))
    with pytest.raises(ValidationError, match="at most one DPU"):
        node_dpu(n)


def test_dpu_node_names_unique() -> None:
    a = Node("a", fabric_ports=dpu_ports(Dpu("a", "bf0", details=(("dpu_node", "bf"),))))
    b = Node("b", fabric_ports=dpu_ports(Dpu("b", "bf0", details=(("dpu_node", "bf"),))))
    with pytest.raises(ValidationError, match="unique"):
        dpu_inventory((a, b))


def test_inventory_import_carries_details() -> None:
    text = """
nodes:
  - name: gpu-a01
    dpus:
      - {name: bf0, mode: dpu, pf: ens1f0, vfs: 16, mgmt_vf: ens1f0v0, representors: [pf0vf1, pf0vf2], nic_model: BlueField-2}
"""
    inv = parse_inventory(text, "yaml")
    d = node_dpus(inv.nodes[0])[0]
    assert dict(d.details) == {"pf": "ens1f0", "vfs": "16", "mgmt_vf": "ens1f0v0", "representors": "pf0vf1,pf0vf2",
                               "nic_model": "BlueField-2"}
    assert DpuInfo.from_dpu(d).representors == ("pf0vf1", "pf0vf2")


def test_inventory_import_refuses_unknown_dpu_key() -> None:
    with pytest.raises(ValidationError) as e:
        parse_inventory("nodes:\n  - name: a\n    dpus: [{name: bf0, colour: red}]\n", "yaml")
    assert e.value.field == "nodes[0].dpus[0].colour"


def test_sriov_policy_excludes_vf0() -> None:
    p = sriov_policy(DpuInfo.from_dpu(_dpu(pf="ens1f0", vfs="8")))
    spec = p["spec"]
    assert (spec["eSwitchMode"], spec["deviceType"], spec["numVfs"]) == ("switchdev", "netdevice", 8)
    assert spec["nicSelector"]["pfNames"] == ["ens1f0#1-7"]
    assert spec["nodeSelector"]["kubernetes.io/hostname"] == "gpu-a01"
