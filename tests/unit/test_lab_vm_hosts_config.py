"""``lab up --vm-hosts`` without running anything (issue 33): the lab's fabrics.yaml lists each VM
host's hypervisor bridge as an ovsdb switch over its own socket with the node's leaf as uplink, the
inventory gives the node one VM port per GPU with ``gpu: m``, other nodes and labs without the flag
are unchanged, and a bad ``vm_hosts`` is refused before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufabric.cli.main import app
from gpufabric.domain.errors import LabError
from gpufabric.fabrics.ethernet.entries import ethernet_ports
from gpufabric.lab.fabrics_config import fabrics_config
from gpufabric.lab.lab import Lab, LabEthPort, LabNode, LabStatus
from gpufabric.lab.vmhost import vm_ip, vm_netns

SM = "0x0002c90310000001"


def status(tmp_path: Path, vm_hosts: tuple[str, ...]) -> LabStatus:
    nodes = tuple(LabNode(n, f"p-{n}", (LabEthPort("eth0", "p-leaf01", f"pn00{k}p0", f"02:00:00:00:0{k}:00", "10.77.0.1/16"),), ())
                  for k, n in enumerate(("gpu-a01", "gpu-a02"), 1))  # fmt: skip
    return LabStatus(home=str(tmp_path), running=True, sm_node="sm-01 mlx5_0", sm_port_guid=SM, leaf_bridges=("p-leaf01",),
                     ovsdb_socket=str(tmp_path / "lab" / "ovs" / "db.sock"), nodes=nodes, gpus_per_node=8,
                     vm_hosts=vm_hosts)  # fmt: skip


def test_fabrics_yaml_lists_each_hypervisor_bridge(tmp_path: Path) -> None:
    cfg = fabrics_config(Lab(tmp_path), status(tmp_path, ("gpu-a02",)), 4000)
    hv = [e for e in cfg["ethernet"] if e["options"]["switch"].startswith("hv-")]
    assert hv == [{"driver": "ovsdb", "uplinks": ["p-leaf01"], "options": {
        "switch": "hv-gpu-a02", "remote": f"unix:{tmp_path / 'lab' / 'vmhosts' / 'gpu-a02' / 'db.sock'}",
        "quarantine_vlan": 4000}}]  # fmt: skip
    plain = fabrics_config(Lab(tmp_path), status(tmp_path, ()), 4000)
    assert [e["options"]["switch"] for e in plain["ethernet"]] == ["p-leaf01"]


def test_the_inventory_gives_a_vm_host_one_vm_port_per_gpu(tmp_path: Path) -> None:
    inv = status(tmp_path, ("gpu-a02",)).inventory()
    a02 = {p.name: (p.switch, p.switch_port, p.gpu) for p in ethernet_ports(inv.node("gpu-a02"))}
    assert a02 == {
        "eth0": ("p-leaf01", "pn002p0", None),
        **{f"vm{m}": ("hv-gpu-a02", f"vm{m}", m) for m in range(1, 9)},
    }
    assert [p.name for p in ethernet_ports(inv.node("gpu-a01"))] == ["eth0"]
    assert vm_netns("gf1", "gpu-a02", 3) == "gf1-gpu-a02-vm3" and vm_ip(2, 3) == "10.78.2.3/16"


@pytest.mark.parametrize(("kw", "match"), [
    ({"vm_hosts": ("gpu-a09",)}, "vm_hosts: gpu-a09: VM hosts are lab nodes with GPUs"),
    ({"vm_hosts": ("gpu-a01",), "gpus_per_node": 0}, "vm_hosts: gpu-a01: VM hosts are lab nodes with GPUs"),
    ({"vm_hosts": ("gpu-a01",), "bonded": ("gpu-a01",)}, "gpu-a01 also bonded"),
])  # fmt: skip
def test_bad_vm_hosts_are_refused_before_anything_starts(tmp_path: Path, kw: dict[str, object], match: str) -> None:
    lab = Lab(tmp_path)
    with pytest.raises(LabError, match=match):
        lab.up(nodes=2, hcas_per_node=1, **kw)  # type: ignore[arg-type]
    assert not lab.state_file.exists() and not (lab.dir / "ovs").exists()


def test_lab_up_help_documents_the_flag() -> None:
    out = CliRunner().invoke(app, ["lab", "up", "--help"], terminal_width=200).output
    assert "--vm-hosts" in out and "hypervisor" in out
