"""A bench fabric of any size: ibsim + the trusted OpenSM (lab net file generator, up to
1,000 nodes x 16 HCAs) and a private OVS (own network namespace) whose leaf bridges hold one
internal port per node, registered in a SQLite store under ``home`` with a ``fabrics.yaml``
and ``config.yaml`` there (so ``gpufabric`` commands run against it with
``GPUFABRIC_HOME=home``).

Unlike ``gpufabric lab up`` it makes no namespace or veth per node (the benches measure the
control plane; the data plane is tested in tests/functional): a 1,000-HCA fabric is up in
well under a minute. Node ``i`` (1-based) is ``gpu-aNN`` with HCA port GUIDs
``hca_port_guid(i, h)`` and Ethernet port ``<leaf>p<i>`` on leaf ``(i-1) // per_leaf``.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpufabric.domain.models import Inventory, Node
from gpufabric.engine.fabrics import Fabrics
from gpufabric.engine.moves import MoveEngine
from gpufabric.fabrics.ethernet.entries import EthernetPort, with_ethernet
from gpufabric.fabrics.infiniband.entries import IbPort, with_ib
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.netfile import SM_NODE, generate_netfile, hca_node_guid, hca_port_guid, node_name
from gpufabric.lab.ovs import OvsServer
from gpufabric.store.core import Store
from gpufabric.store.registry import Registry, parse_segments


@dataclass
class BenchFabric:
    home: Path
    prefix: str
    ib: IbFabric
    ovs: OvsServer
    nodes: tuple[Node, ...]
    leaves: tuple[str, ...]
    setup_seconds: float = 0.0

    @property
    def sm_guid(self) -> str:
        return str(hca_port_guid(0, 0))

    def fabrics_raw(self, quarantine_vlan: int) -> dict[str, Any]:
        return {
            "ethernet": [
                {"driver": "ovsdb", "options": {"switch": br, "remote": self.ovs.remote, "quarantine_vlan": quarantine_vlan}}
                for br in self.leaves
            ],
            "infiniband": {
                "driver": "opensm",
                "options": {**self.ib.driver_options(SM_NODE, [self.sm_guid]), "sweep_timeout": 180, "verify_timeout": 120,
                            "opensm_conf": str(self.ib.opensm_conf)},  # read by observe: the hardening audit
            },
            "sm_port_guids": [self.sm_guid],
            "trusted_sm_guids": [self.sm_guid],
        }

    def engine(self, verify_timeout: float = 120) -> MoveEngine:
        cfg = parse_segments()
        fabrics = Fabrics.from_config(self.fabrics_raw(cfg.settings()["quarantine_vlan"]), Registry.from_entry_points())
        return MoveEngine(Store.open(home=self.home), fabrics, cfg, verify_timeout=verify_timeout)

    def stop(self) -> None:
        try:
            self.ib.stop()
        finally:
            self.ovs.stop()


def start(home: Path, nodes: int, hcas_per_node: int, per_leaf: int = 32) -> BenchFabric:
    """Start ibsim + OpenSM + OVS for ``nodes`` nodes and register them (see module doc)."""
    t0 = time.monotonic()
    home.mkdir(parents=True, exist_ok=True)
    prefix = "gb" + secrets.token_hex(2)
    ib = IbFabric(home / "ib", f"{prefix}-ibsim", SM_NODE)
    ovs = OvsServer(home / "ovs", netns=f"{prefix}-ovs")
    leaves = tuple(f"{prefix}l{i:02d}" for i in range((nodes + per_leaf - 1) // per_leaf))
    inv: list[Node] = []
    try:
        ib.start_ibsim(generate_netfile(nodes, hcas_per_node))
        ib.start_opensm(timeout=180)
        ovs.start()
        args: list[str] = []
        for i in range(1, nodes + 1):
            leaf = leaves[(i - 1) // per_leaf]
            if (i - 1) % per_leaf == 0:
                args += ["--", "add-br", leaf, "--", "set", "bridge", leaf, "datapath_type=netdev"]
            port = f"{leaf}p{i}"
            args += ["--", "add-port", leaf, port, "--", "set", "interface", port, "type=internal"]
            name = node_name(i)
            inv.append(
                with_ib(
                    with_ethernet(Node(name), EthernetPort(name, "eth0", leaf, port)),
                    *(IbPort(name, f"mlx5_{h}", 1, hca_port_guid(i, h), hca_node_guid(i, h)) for h in range(hcas_per_node)),
                )
            )
        ovs.vsctl(*args[1:], timeout=600)
    except BaseException:
        ib.stop()
        ovs.stop()
        raise
    fab = BenchFabric(home, prefix, ib, ovs, tuple(inv), leaves)
    cfg = parse_segments()
    (home / "fabrics.yaml").write_text(yaml.safe_dump(fab.fabrics_raw(cfg.settings()["quarantine_vlan"])))
    store = Store.open(home=home)
    store.upsert_inventory(Inventory(tuple(inv)))
    fab.setup_seconds = time.monotonic() - t0
    return fab


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]
