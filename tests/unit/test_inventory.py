"""The YAML/JSON inventory loader: the shipped example, and bad inputs naming their field."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.models import Inventory, Node, NodeState
from gpufabric.domain.values import Guid, ModuleId, PortNaming
from gpufabric.fabrics.dpu.entries import Dpu, DpuMode
from gpufabric.fabrics.dpu.entries.info import node_dpus
from gpufabric.fabrics.ethernet.entries import EthernetPort, ethernet_ports
from gpufabric.fabrics.infiniband.entries import IbPort, all_ib_ports
from gpufabric.fabrics.infiniband.inventory.claims import Seen, resolve
from gpufabric.fabrics.infiniband.inventory.importer import mark_sm_hosts
from gpufabric.fabrics.nvlink.entries import Gpu, node_gpus
from gpufabric.workflow.inventory import inventory_from_dict, load_inventory, parse_inventory

from support.ports import port_node

EXAMPLE = Path(__file__).parents[2] / "examples" / "inventory.yaml"


def test_example_parses_with_concrete_values() -> None:
    inv = load_inventory(EXAMPLE)
    assert [n.name for n in inv.nodes] == ["gpu-h100-01", "gpu-h100-02", "gpu-h100-03"]
    n1 = inv.nodes[0]
    assert n1.offering == "baremetal"
    assert ethernet_ports(n1) == (
        EthernetPort("gpu-h100-01", "eth0", "leaf-eth-1", "Ethernet1", "52:54:00:a1:00:00"),
        EthernetPort("gpu-h100-01", "eth1", "leaf-eth-2", "Ethernet1", "52:54:00:a1:00:01"),
    )
    assert [p.device for p in all_ib_ports(n1)] == [f"mlx5_{k}" for k in range(8)]
    assert all_ib_ports(n1)[1] == IbPort(
        "gpu-h100-01", "mlx5_1", 1, Guid(0x0002C90300000101), Guid(0x0002C90300010101), Guid(0x0002C90300F00001), 9
    )
    assert [g.module_id.value for g in node_gpus(n1)] == list(range(1, 9))
    assert node_gpus(n1)[0] == Gpu("gpu-h100-01", ModuleId(1), "0000:18:00.0")
    assert node_dpus(n1) == () and [p.instance for p in n1.fabric_ports] == ["ethernet", "infiniband", "nvlink"]  # no DPU
    assert inv.nodes[2].offering == "openshift"
    assert node_dpus(inv.nodes[2]) == (Dpu("gpu-h100-03", "bf3-0", DpuMode.DPU_HOST),)
    guids = [p.port_guid for n in inv.nodes for p in all_ib_ports(n)]
    assert len(guids) == 24 and len(set(guids)) == 24


def test_json_gives_the_same_inventory(tmp_path: Path) -> None:
    data = yaml.safe_load(EXAMPLE.read_text())
    for node in data["nodes"]:
        for p in node["ib"]:
            p["port_guid"] = f"0x{p['port_guid']:016x}"  # JSON has no hex numbers: strings
    f = tmp_path / "inv.json"
    f.write_text(json.dumps(data))
    assert load_inventory(f) == load_inventory(EXAMPLE)
    assert load_inventory(f, "json") == load_inventory(EXAMPLE, "yaml")


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [
        ("mac: 52:54:00:12:34:56", "mac", "52:54:00:12:34:56"),
        ("pci_bus_id: 0000:18:00.0", "pci_bus_id", "0000:18:00.0"),
        ("guid: 0002c90300000001", "guid", "0002c90300000001"),
        ("guid: 0x0002c90300000001", "guid", 0x0002C90300000001),
        ("name: no", "name", "no"),
    ],
    ids=["mac-not-base60", "pci-not-base60-float", "guid-leading-zeros-string", "hex-int", "no-is-not-false"],
)
def test_yaml_scalars_are_yaml12(text: str, field: str, value: object) -> None:
    from gpufabric.workflow.inventory import _Yaml12Loader

    assert yaml.load(text, Loader=_Yaml12Loader) == {field: value}


def test_unquoted_mac_and_pci_in_yaml() -> None:
    inv = parse_inventory(
        """
nodes:
  - name: n1
    ethernet: [{name: eth0, switch: sw, switch_port: 7, mac: 52:54:00:12:34:56}]
    gpus: [{module_id: 1, pci_bus_id: 0000:1A:00.0}]
    ib: [{device: mlx5_0, port_guid: "00:02:c9:03:00:00:00:01", node_guid: 0002:c903:0000:0002}]
"""
    )
    n = inv.nodes[0]
    assert (ethernet_ports(n)[0].mac, ethernet_ports(n)[0].switch_port) == ("52:54:00:12:34:56", "7")
    assert node_gpus(n)[0].pci_bus_id == "0000:1a:00.0"
    assert (all_ib_ports(n)[0].port_num, all_ib_ports(n)[0].port_guid, all_ib_ports(n)[0].node_guid) == (
        1,
        Guid(0x0002C90300000001),
        Guid(0x0002C90300000002),
    )


def _good() -> dict[str, Any]:
    return {
        "version": 1,
        "nodes": [
            {
                "name": "n1",
                "ethernet": [{"name": "eth0", "switch": "sw1", "switch_port": "p1"}],
                "ib": [{"device": "mlx5_0", "port_guid": "0x1", "node_guid": "0x2"}],
                "gpus": [{"module_id": 1}],
                "dpus": [{"name": "bf3"}],
            },
            {"name": "n2", "ib": [{"device": "mlx5_0", "port_guid": "0x3", "node_guid": "0x4"}]},
        ],
    }


def _set(path: list[Any], value: Any) -> dict[str, Any]:
    d = _good()
    target: Any = d
    for k in path[:-1]:
        target = target[k]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return d


_DELETE = object()
_IB0 = ["nodes", 0, "ib", 0]
_ETH0 = ["nodes", 0, "ethernet", 0]


def _dup_guid() -> dict[str, Any]:
    d = _good()
    d["nodes"][1]["ib"][0]["port_guid"] = "0x0000000000000001"
    return d


def _dup_switch_port() -> dict[str, Any]:
    d = _good()
    d["nodes"][1]["ethernet"] = [copy.deepcopy(d["nodes"][0]["ethernet"][0])]
    return d


def _dup_node() -> dict[str, Any]:
    d = _good()
    d["nodes"][1]["name"] = "n1"
    return d


BAD: list[tuple[str, Any, str, str]] = [
    ("top-not-mapping", [1, 2], "inventory", "a mapping with keys nodes, version"),
    ("version", _set(["version"], 2), "version", "1"),
    ("unknown-top-key", _set(["hosts"], []), "hosts", "known keys only"),
    ("nodes-not-list", _set(["nodes"], {"n1": {}}), "nodes", "a list"),
    ("node-not-mapping", _set(["nodes", 1], "n2"), "nodes[1]", "a mapping"),
    ("node-name-missing", _set(["nodes", 1, "name"], _DELETE), "nodes[1].name", "required"),
    ("node-name-bad", _set(["nodes", 1, "name"], "N2!"), "nodes[1].name", "1-63 chars"),
    ("node-unknown-key", _set(["nodes", 0, "gpu"], []), "nodes[0].gpu", "known keys only"),
    ("offering-bad", _set(["nodes", 0, "offering"], "Open Stack"), "nodes[0].offering", "1-63 chars"),
    ("ethernet-not-list", _set(["nodes", 0, "ethernet"], {"name": "eth0"}), "nodes[0].ethernet", "a list"),
    ("nic-name-missing", _set([*_ETH0, "name"], _DELETE), "nodes[0].ethernet[0].name", "required"),
    ("switch-empty", _set([*_ETH0, "switch"], ""), "nodes[0].ethernet[0].switch", "non-empty string"),
    ("mac-bad", _set([*_ETH0, "mac"], "52:54:00:12:34"), "nodes[0].ethernet[0].mac", "six colon-separated"),
    ("mac-int", _set([*_ETH0, "mac"], 1234), "nodes[0].ethernet[0].mac", "six colon-separated"),
    ("port-guid-bad", _set([*_IB0, "port_guid"], "xyz"), "nodes[0].ib[0].port_guid", "64-bit hex"),
    ("port-guid-missing", _set([*_IB0, "port_guid"], _DELETE), "nodes[0].ib[0].port_guid", "required"),
    ("node-guid-too-long", _set([*_IB0, "node_guid"], "0x" + "1" * 17), "nodes[0].ib[0].node_guid", "64-bit"),
    ("switch-guid-list", _set([*_IB0, "switch_guid"], [1]), "nodes[0].ib[0].switch_guid", "64-bit hex"),
    ("port-num-zero", _set([*_IB0, "port_num"], 0), "nodes[0].ib[0].port_num", "an integer 1-254"),
    ("port-num-text", _set([*_IB0, "port_num"], "1"), "nodes[0].ib[0].port_num", "an integer 1-254"),
    ("ib-switch-port", _set([*_IB0, "switch_port"], 255), "nodes[0].ib[0].switch_port", "an integer 1-254"),
    ("module-id-zero", _set(["nodes", 0, "gpus", 0, "module_id"], 0), "nodes[0].gpus[0].module_id", "1-64"),
    ("module-id-bool", _set(["nodes", 0, "gpus", 0, "module_id"], True), "nodes[0].gpus[0].module_id", "1-64"),
    ("pci-bad", _set(["nodes", 0, "gpus", 0, "pci_bus_id"], "18:00.0"), "nodes[0].gpus[0].pci_bus_id", "PCI"),
    ("dpu-mode", _set(["nodes", 0, "dpus", 0, "mode"], "smart"), "nodes[0].dpus[0].mode", "full or dpu or dpu-host"),
    ("dup-node", _dup_node(), "nodes[1].name", "unique node names (also at nodes[0].name)"),
    ("dup-port-guid", _dup_guid(), "nodes[1].ib[0].port_guid", "unique port GUIDs (also at nodes[0].ib[0].port_guid)"),
    ("dup-switch-port", _dup_switch_port(), "nodes[1].ethernet[0].switch_port", "unique switch ports"),
    ("port-shell-separator", _set([*_ETH0, "switch_port"], "Ethernet40;reload"), "nodes[0].ethernet[0].switch_port", "1-64 chars"),
    ("port-command-substitution", _set([*_ETH0, "switch_port"], "$(touch x)"), "nodes[0].ethernet[0].switch_port", "1-64 chars"),
    ("port-5000-chars", _set([*_ETH0, "switch_port"], "E" * 5000), "nodes[0].ethernet[0].switch_port", "1-64 chars"),
    ("port-embedded-newline", _set([*_ETH0, "switch_port"], "Ethernet40\nreload"), "nodes[0].ethernet[0].switch_port", "1-64 chars"),
    ("switch-name-space", _set([*_ETH0, "switch"], "sw 1"), "nodes[0].ethernet[0].switch", "1-64 chars"),
    ("nic-name-backtick", _set([*_ETH0, "name"], "eth0`id`"), "nodes[0].ethernet[0].name", "1-64 chars"),
    ("port-guid-zero", _set([*_IB0, "port_guid"], "0x0"), "nodes[0].ib[0].port_guid", "not 0"),
    ("node-guid-zero", _set([*_IB0, "node_guid"], 0), "nodes[0].ib[0].node_guid", "not 0"),
    ("port-guid-all-ones", _set([*_IB0, "port_guid"], "0x" + "f" * 16), "nodes[0].ib[0].port_guid", "not 0"),
    ("node-name-trailing-newline", _set(["nodes", 1, "name"], "n2\n"), "nodes[1].name", "1-63 chars"),
    ("dup-node-guid-across-nodes", _set(["nodes", 1, "ib", 0, "node_guid"], "0x2"), "nodes[1].ib[0].node_guid", "unique node GUIDs per node (also at nodes[0].ib[0].node_guid)"),
]


@pytest.mark.parametrize(("data", "field", "allowed"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_names_its_field(data: Any, field: str, allowed: str) -> None:
    with pytest.raises(ValidationError) as e:
        inventory_from_dict(data)
    assert e.value.field == field
    assert allowed in e.value.allowed
    assert f"invalid {field}:" in str(e.value)


def test_good_base_is_valid() -> None:  # the BAD cases each break exactly one thing of this
    inv = inventory_from_dict(_good())
    assert [n.name for n in inv.nodes] == ["n1", "n2"]
    assert node_dpus(inv.nodes[0]) == (Dpu("n1", "bf3", DpuMode.FULL),)


@pytest.mark.parametrize(
    ("text", "fmt", "field", "value"),
    [
        ("nodes: [", "yaml", "inventory", "line 1 column 9"),
        ('{"nodes": [}', "json", "inventory", "line 1 column 12"),
        ("nodes: []", "toml", "format", "toml"),
    ],
    ids=["yaml-syntax", "json-syntax", "unknown-format"],
)
def test_syntax_errors(text: str, fmt: str, field: str, value: str) -> None:
    with pytest.raises(ValidationError) as e:
        parse_inventory(text, fmt)
    assert (e.value.field, e.value.value) == (field, value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="readable UTF-8 YAML or JSON file") as e:
        load_inventory(tmp_path / "nope.yaml")
    assert e.value.field == "inventory"


DIALECT_PORTS: list[tuple[str, str, str, bool]] = [
    ("sonic-ok", "sonic", "Ethernet40", True),
    ("sonic-junos-name", "sonic", "xe-0/0/1", False),
    ("nxos-ok", "nxos", "Ethernet1/12", True),
    ("nxos-bare-number", "nxos", "12", False),
    ("junos-ok", "junos", "xe-0/0/12", True),
    ("nvue-ok", "nvue", "swp12", True),
    ("nvue-sonic-name", "nvue", "Ethernet12", False),
    ("ovs-ok", "ovs", "gf-a01-e0", True),
    ("ovs-too-long-for-linux", "ovs", "a" * 16, False),
]


def _namings(dialect: str) -> dict[str, PortNaming]:
    """sw1 speaks ``dialect``: its port naming, read from fabrics.yaml the way ``inventory import`` does."""
    from gpufabric.fabrics.ethernet.drivers.ssh.dialects import port_namings

    drv = {"driver": "ovsdb"} if dialect == "ovs" else {"driver": "ssh"}
    opts = {"switch": "sw1"} if dialect == "ovs" else {"switch": "sw1", "dialect": dialect}
    return port_namings({"ethernet": [{**drv, "options": opts}]})


@pytest.mark.parametrize(("dialect", "port", "ok"), [d[1:] for d in DIALECT_PORTS], ids=[d[0] for d in DIALECT_PORTS])
def test_port_names_checked_per_dialect(dialect: str, port: str, ok: bool) -> None:
    data = _set([*_ETH0, "switch_port"], port)
    if ok:
        assert ethernet_ports(inventory_from_dict(data, _namings(dialect)).nodes[0])[0].switch_port == port
    else:
        with pytest.raises(ValidationError) as e:
            inventory_from_dict(data, _namings(dialect))
        assert e.value.field == "nodes[0].ethernet[0].switch_port"
        assert dialect in e.value.allowed


def test_hostile_value_gives_one_short_line() -> None:
    with pytest.raises(ValidationError) as e:
        inventory_from_dict(_set([*_ETH0, "switch_port"], "E" * 5000))
    assert "\n" not in str(e.value) and len(str(e.value)) < 300 and "5000 chars" in str(e.value)


def _ibnode(name: str, guid: int) -> Node:
    return port_node(name, ib=(IbPort(name, "mlx5_0", 1, Guid(guid), Guid(guid + 0x100)),))


def test_reimport_holds_a_description_moving_a_known_guid() -> None:
    known = [_ibnode("gpu-a01", 0x11), _ibnode("gpu-b01", 0x22)]
    forged = Seen(Guid(0x11), Guid(0x111), 1, None, None, "gpu-b01 mlx5_0", "gpu-b01", "mlx5_0")  # gpu-a01's HCA
    out = resolve([forged], known, "infiniband")
    assert out.nodes == (known[0],)  # the port stays on gpu-a01
    (held,) = out.held
    assert (held.change, held.was, held.node, held.token) == ("move", "gpu-a01", "gpu-b01", "0x0000000000000011=gpu-b01")
    assert "0x0000000000000011" in held.line() and "gpu-a01" in held.line() and "--confirm" in held.line()
    new = Seen(Guid(0x33), Guid(0x133), 1, None, None, "gpu-c01 mlx5_0", "gpu-c01", "mlx5_0")
    assert [n.name for n in resolve([new], known, "infiniband").nodes] == ["gpu-c01"]  # a new node: added


def test_sm_host_is_marked_maintenance() -> None:
    inv = Inventory((_ibnode("sm-01", 0x11), _ibnode("gpu-a01", 0x22)))
    marked, hosts = mark_sm_hosts(inv, [Guid(0x11)])
    assert hosts == ("sm-01",)
    assert {n.name: n.state for n in marked.nodes} == {"sm-01": NodeState.MAINTENANCE, "gpu-a01": NodeState.AVAILABLE}
