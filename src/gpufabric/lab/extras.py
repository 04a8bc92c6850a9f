"""The lab's NVLink and DPU fabrics, beside its InfiniBand and Ethernet ones.

* NVLink: one stand-in Fabric Manager per node (``gpufabric.lab.fmpm_standin``, speaking
  ``fmpm``'s interface; state files under ``lab/nvlink``), and 8 GPUs per node in the inventory
  with the Module Id <-> PCI bus map of a real HGX H100 box (not PCI order).
* Rails (issue 33): with as many HCAs on a subnet as GPUs, HCA ``mlx5_i`` is GPU module i+1's
  rail (``gpu`` of its inventory entry, :func:`with_rails`), the NIC:GPU 1:1 of an HGX box.
* DPU: a real OVN central and, for the first ``dpus`` nodes, a DPU with its own userspace OVS and
  ``ovn-controller`` (``lab/ovn.py``, under ``lab/ovn``), one veth "pod" on VF representor
  ``pf0vf1`` per DPU bound to the node's logical port, and a Kubernetes API stand-in (kmock,
  ``lab/kube.py``) holding a Node object for each host and each DPU.

Real Fabric Manager, BlueField offload and a Kubernetes API server cannot run here.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpufabric.domain.errors import LabError
from gpufabric.domain.values import ModuleId
from gpufabric.fabrics.dpu.plan.profiles import port_mac, port_name
from gpufabric.fabrics.infiniband.entries import IbPort
from gpufabric.fabrics.nvlink.entries import Gpu
from gpufabric.fabrics.nvlink.segments import HGX_8GPU_PCI
from gpufabric.lab.fmpm_standin import init_state, lab_section
from gpufabric.lab.kube import KubeStandin
from gpufabric.lab.mlxstub import write_state
from gpufabric.lab.ovn import OvnLab

REPRESENTOR = "pf0vf1"
DPU_NAME = "bf3"


def lab_gpus(node: str, count: int) -> tuple[Gpu, ...]:
    """``count`` GPUs (0 or 8) by Module Id, each with the PCI bus the real box gives it."""
    if count not in (0, 8):
        raise LabError(f"gpus per node must be 0 or 8 (one HGX 8-GPU baseboard), got {count}", gpus=count)
    return tuple(Gpu(node, ModuleId(m), HGX_8GPU_PCI[m]) for m in sorted(HGX_8GPU_PCI)) if count else ()


def with_rails(ports: tuple[IbPort, ...], gpus: int) -> tuple[IbPort, ...]:
    """``ports`` (one node's) with GPU affinity: on a subnet where the node has exactly ``gpus``
    HCAs, the i-th HCA by device number (``mlx5_0``, ``mlx5_1``, ...) is GPU module i+1's rail;
    every other shape is left as it is."""
    by_subnet: dict[str, list[str]] = {}
    for p in ports:
        devices = by_subnet.setdefault(p.subnet, [])
        if p.device not in devices:
            devices.append(p.device)
    gpu_of: dict[tuple[str, str], int] = {}
    for subnet, devices in by_subnet.items():
        if gpus and len(devices) == gpus:
            ordered = sorted(devices, key=lambda d: (int(m.group()) if (m := re.search(r"\d+$", d)) else -1, d))
            gpu_of.update({(subnet, d): i + 1 for i, d in enumerate(ordered)})
    return tuple(dataclasses.replace(p, gpu=gpu_of[(p.subnet, p.device)]) if (p.subnet, p.device) in gpu_of else p
                 for p in ports)  # fmt: skip


def nvlink_up(root: Path, hosts: list[str]) -> dict[str, Any]:
    """Stand-in FMs for ``hosts`` (state kept across ``up``: only missing ones start fresh);
    returns the ``nvlink:`` section of fabrics.yaml."""
    root.mkdir(parents=True, exist_ok=True)
    fresh = [h for h in hosts if not (root / f"{h}.fm").exists()]
    keep = {h: (root / f"{h}.fm").read_bytes() for h in hosts if h not in fresh}
    section = lab_section(hosts, root)
    for h, raw in keep.items():  # lab_section starts every FM fresh: put the running ones back
        (root / f"{h}.fm").write_bytes(raw)
    for h in fresh:
        init_state(root / f"{h}.fm", node=h)
    return section


def dpu_pod_ip(index: int) -> str:
    return f"10.88.0.{10 + index}"


def dpu_details(host: str) -> tuple[tuple[str, str], ...]:
    """The inventory details of ``host``'s lab DPU (its OVSDB is in the DPU section of fabrics.yaml)."""
    return (("dpu_node", f"{host}-{DPU_NAME}"), ("representors", REPRESENTOR))


def dpus_up(root: Path, prefix: str, hosts: list[str]) -> dict[str, Any]:
    """OVN central + one DPU per host + the Kubernetes stand-in, under ``root``; returns the
    ``dpu:`` section of fabrics.yaml."""
    ovn = OvnLab(root / "ovn", prefix=f"{prefix}d")
    ovn.up(hosts)
    url = KubeStandin(root / "kube").up()
    _ensure_k8s_nodes(url, [*hosts, *(f"{h}-{DPU_NAME}" for h in hosts)])
    for i, h in enumerate(hosts):
        if f"{h}/{REPRESENTOR}" not in ovn._state()["pods"]:
            ovn.add_pod(h, REPRESENTOR, port_name(h, REPRESENTOR), port_mac(h, REPRESENTOR), f"{dpu_pod_ip(i)}/24")
    mst = root / "mst"  # the lab's mlxconfig/flint stand-in: every DPU in embedded (DPU) mode
    mst.mkdir(exist_ok=True)
    for h in hosts:
        if not (mst / f"{h}.json").exists():
            write_state(mst / f"{h}.json")
    section = ovn.fabrics_section({"host": url})
    section["mst"] = {"command": [sys.executable, "-m", "gpufabric.lab.mlxstub", str(mst / "{host}.json")]}
    return section


def dpus_down(root: Path, prefix: str) -> None:
    if (root / "ovn" / "ovn-lab.json").exists():
        OvnLab(root / "ovn", prefix=f"{prefix}d").down()
    KubeStandin(root / "kube").down()


def _ensure_k8s_nodes(url: str, names: list[str]) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    cfg = client.Configuration()
    cfg.host = url
    api = client.CoreV1Api(client.ApiClient(cfg))
    for n in names:
        try:
            api.read_node(n)
        except ApiException:
            body: Any = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}}
            api.create_node(body)


def pod_ping(root: Path, prefix: str, src: str, dst_index: int) -> bool:
    """Ping from ``src``'s pod to the pod of the DPU at ``dst_index`` (for tests and the demo)."""
    ovn = OvnLab(root / "ovn", prefix=f"{prefix}d")
    pod = ovn._state()["pods"].get(f"{src}/{REPRESENTOR}")
    if not pod:
        raise LabError(f"no pod on {src}'s DPU", node=src)
    p = subprocess.run(["ip", "netns", "exec", pod, "ping", "-c", "1", "-W", "1", dpu_pod_ip(dst_index)],
                       capture_output=True, check=False)  # fmt: skip
    return p.returncode == 0
