"""A DPU site for functional tests: real OVN (OvnLab, a userspace OVS per DPU), Kubernetes through
kmock with the Eviction subresource (support/kmock_evict.py), and each DPU's mode answered by the
lab's mlxconfig/flint stand-in (gpufabric.lab.mlxstub). ``dpu_site`` writes the home's
fabrics.yaml (``dpu`` section) and inventory.yaml for ``nodes``, each with one DPU ``bf0``; the
tests import the inventory themselves (their own CLI wrapper)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpufabric.lab.mlxstub import write_state
from gpufabric.lab.ovn import OvnLab

from support.kmock_evict import EvictBox, api_of, kmock_evicting

STUB = [sys.executable, "-m", "gpufabric.lab.mlxstub"]


@dataclass(frozen=True)
class DpuSite:
    home: Path
    lab: OvnLab
    box: EvictBox
    api: Any


@contextmanager
def dpu_site(home: Path, nodes: list[str], *, prefix: str, modes: Mapping[str, str], section: Mapping[str, Any],
             dpu: Mapping[str, str] | None = None) -> Iterator[DpuSite]:  # fmt: skip
    """``modes``: each node's DPU mode for the stand-in; ``section``: keys added to the dpu section
    (drain, capacity...); ``dpu``: keys added to each inventory DPU (nic_model...)."""
    lab = OvnLab(home / "ovn", prefix=f"{prefix}{os.getpid() % 1000}")
    (home / "mst").mkdir()
    for n in nodes:
        write_state(home / "mst" / f"{n}.json", mode=modes[n])
    try:
        lab.up(nodes)
        with kmock_evicting() as box:
            api = api_of(box.url)
            for n in nodes:
                api.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}})
                api.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"{n}-bf0"}})
            full = lab.fabrics_section({"host": box.url}) | {
                "mst": {"command": [*STUB, str(home / "mst" / "{host}.json")]}, **section}
            (home / "fabrics.yaml").write_text(yaml.safe_dump({"dpu": full}))
            inv = {"nodes": [{"name": n, "dpus": [{"name": "bf0", "mode": "dpu", "representors": "pf0vf1",
                                                   **(dpu or {})}]} for n in nodes]}  # fmt: skip
            (home / "inventory.yaml").write_text(yaml.safe_dump(inv))
            yield DpuSite(home, lab, box, api)
    finally:
        lab.down()
