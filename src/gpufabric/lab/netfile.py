"""Pure generator of the lab's InfiniBand fabric as an ibsim net file (leaf/spine).

Layout
------
* ``nodes`` GPU nodes ``gpu-a01`` .. ``gpu-aNN``, each with ``hcas_per_node`` single-port HCAs
  ``mlx5_0`` .. ``mlx5_{K-1}``; the node description of each HCA is ``"<host> <device>"``
  exactly as rdma-ndd sets it (``gpu-a01 mlx5_0``). In the net file the quoted node id *is*
  that description, so ``SIM_HOST="gpu-a01 mlx5_0"`` attaches a client to that HCA.
* leaves ``leaf-01`` .. of ``leaf_ports`` ports (36 by default): ports ``1 .. leaf_ports/2`` are
  downlinks, the upper half are uplinks. Nodes fill leaves in order, ``nodes_per_leaf`` per
  leaf (default: 4, fewer when that many nodes' HCAs do not fit), a node's HCAs on
  consecutive ports. Leaf 1 reserves its last downlink port for the
  SM node.
* ``spines`` spines ``spine-01`` .. (>= 2); every leaf has one link to every spine
  (leaf port ``leaf_ports/2 + s`` to spine port ``leaf index``).
* one dedicated SM node ``sm-01`` with HCA ``mlx5_0`` (description ``sm-01 mlx5_0``), where the
  trusted OpenSM runs.

GUID scheme (deterministic, the vendor prefix 0x0002c903 of the ibsim examples' era)
----------------------------------------------------------------------------------
* HCA node GUID ``0x0002c9031NNNNH00`` ... precisely ``0x0002c90310000000 | n << 8 | h << 4``
  with ``n`` the node number (1-based; 0 is the SM node) and ``h`` the HCA index; its port 1
  GUID is node GUID + 1. Example: ``gpu-a01 mlx5_1`` = node 0x0002c90310000110, port ...111.
* spine ``s``: ``0x0002c90320000000 + s``; leaf ``l``: ``0x0002c90330000000 + l`` (switch port
  GUIDs equal the node GUID, as in ibsim).

ibsim assigns these because every node record is preceded by an absolute ``switchguid=`` /
``caguid=`` line (see ibsim's sim_net.c ``parse_guidbase``).

The storage subnet (``gpufabric lab up --ib-subnets 2``, tests/fabrics/infiniband/functional/test_ib_two_subnets.py)
---------------------------------------------------------------------------------------------
:func:`storage_netfile`: the same generator with one HCA per node, every HCA ``mlx5_8``, its SM
node ``sm-03`` and every GUID moved up by :data:`STORAGE_GUID_OFFSET` (``0x0002c9031..`` ->
``0x0002c9051..``, spines ``..52..``, leaves ``..53..``): no GUID is on both subnets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import Guid

HCA_GUID_BASE = 0x0002C90310000000
SPINE_GUID_BASE = 0x0002C90320000000
LEAF_GUID_BASE = 0x0002C90330000000

SM_HOST = "sm-01"
SM_DEVICE = "mlx5_0"
SM_NODE = f"{SM_HOST} {SM_DEVICE}"
"""The node description (and ibsim node id, usable as SIM_HOST) of the trusted SM's HCA."""

STORAGE_DEVICE = "mlx5_8"
STORAGE_SM_HOST = "sm-03"
STORAGE_SM_NODE = f"{STORAGE_SM_HOST} {STORAGE_DEVICE}"
STORAGE_GUID_OFFSET = 0x0000000200000000  # 0x0002c9031... -> 0x0002c9051... (and 32 -> 52, 33 -> 53)

MAX_NODES = 2048  # a 2,048-node HGX cluster: 16,384 HCAs at 8 per node (bench_ib_scale)
MAX_HCAS = 16


def node_name(index: int) -> str:
    """``gpu-a01`` for index 1 (two digits at least)."""
    return f"gpu-a{index:02d}"


def hca_node_guid(node_index: int, hca: int) -> Guid:
    return Guid(HCA_GUID_BASE | node_index << 8 | hca << 4)


def hca_port_guid(node_index: int, hca: int) -> Guid:
    return Guid(hca_node_guid(node_index, hca).value + 1)


@dataclass(frozen=True)
class FabricSpec:
    nodes: int = 6
    hcas_per_node: int = 2
    nodes_per_leaf: int = 0  # 0: auto, min(4, what fits the leaf's downlinks)
    spines: int = 2
    leaf_ports: int = 36

    def __post_init__(self) -> None:
        if self.nodes_per_leaf == 0 and 1 <= self.hcas_per_node <= self.leaf_ports // 2 - 1:
            object.__setattr__(self, "nodes_per_leaf", max(1, min(4, (self.leaf_ports // 2 - 1) // self.hcas_per_node)))
        if not 1 <= self.nodes <= MAX_NODES:
            raise ValidationError("nodes", self.nodes, f"1-{MAX_NODES}")
        if not 1 <= self.hcas_per_node <= MAX_HCAS:
            raise ValidationError("hcas_per_node", self.hcas_per_node, f"1-{MAX_HCAS}")
        if not 4 <= self.leaf_ports <= 254 or self.leaf_ports % 2:
            raise ValidationError("leaf_ports", self.leaf_ports, "an even number 4-254")
        if not 2 <= self.spines <= self.leaf_ports // 2:
            raise ValidationError("spines", self.spines, f"2-{self.leaf_ports // 2} (one uplink per spine)")
        down = self.leaf_ports // 2 - 1  # leaf 1 keeps its last downlink for the SM node
        if not 1 <= self.nodes_per_leaf * self.hcas_per_node <= down:
            raise ValidationError(
                "nodes_per_leaf",
                self.nodes_per_leaf,
                f"1-{down // self.hcas_per_node} with {self.hcas_per_node} HCAs per node on {self.leaf_ports}-port leaves",
            )
        if self.leaves > 254:
            raise ValidationError("nodes", self.nodes, "at most 254 leaves (spine radix)")

    @property
    def leaves(self) -> int:
        return max(1, math.ceil(self.nodes / self.nodes_per_leaf))

    @property
    def spine_ports(self) -> int:
        return max(self.leaf_ports, self.leaves)


@dataclass(frozen=True)
class HcaPlan:
    """One HCA (single port) of a node and where it is cabled."""

    host: str
    device: str
    node_guid: Guid
    port_guid: Guid
    leaf: str
    leaf_port: int

    @property
    def description(self) -> str:
        return f"{self.host} {self.device}"


@dataclass(frozen=True)
class SwitchLink:
    leaf: str
    leaf_port: int
    spine: str
    spine_port: int


@dataclass(frozen=True)
class FabricLayout:
    spec: FabricSpec
    hosts: tuple[str, ...]
    hcas: tuple[HcaPlan, ...]  # GPU node HCAs, then the SM node's
    leaves: tuple[tuple[str, Guid], ...]
    spines: tuple[tuple[str, Guid], ...]
    uplinks: tuple[SwitchLink, ...]

    @property
    def sm(self) -> HcaPlan:
        return self.hcas[-1]

    def leaf_of(self, host: str) -> str:
        return next(h.leaf for h in self.hcas if h.host == host)


def leaf_name(i: int) -> str:
    return f"leaf-{i:02d}"


def spine_name(i: int) -> str:
    return f"spine-{i:02d}"


def plan_fabric(spec: FabricSpec) -> FabricLayout:
    """Place nodes, HCAs, leaves and spines (pure, deterministic)."""
    hosts = tuple(node_name(i) for i in range(1, spec.nodes + 1))
    hcas: list[HcaPlan] = []
    for n, host in enumerate(hosts, start=1):
        leaf_idx, slot = divmod(n - 1, spec.nodes_per_leaf)
        for h in range(spec.hcas_per_node):
            port = slot * spec.hcas_per_node + h + 1
            hcas.append(
                HcaPlan(host, f"mlx5_{h}", hca_node_guid(n, h), hca_port_guid(n, h), leaf_name(leaf_idx + 1), port)
            )
    hcas.append(
        HcaPlan(SM_HOST, SM_DEVICE, hca_node_guid(0, 0), hca_port_guid(0, 0), leaf_name(1), spec.leaf_ports // 2)
    )
    leaves = tuple((leaf_name(i), Guid(LEAF_GUID_BASE + i)) for i in range(1, spec.leaves + 1))
    spines = tuple((spine_name(i), Guid(SPINE_GUID_BASE + i)) for i in range(1, spec.spines + 1))
    uplinks = tuple(
        SwitchLink(leaf, spec.leaf_ports // 2 + s, spine, li)
        for li, (leaf, _) in enumerate(leaves, start=1)
        for s, (spine, _) in enumerate(spines, start=1)
    )
    return FabricLayout(spec, hosts, tuple(hcas), leaves, spines, uplinks)


def render_netfile(layout: FabricLayout) -> str:
    """The ibsim net file text of ``layout``."""
    spec = layout.spec
    out = [
        "# gpufabric lab fabric (generated; see gpufabric.lab.netfile for the GUID scheme)",
        f"# nodes={spec.nodes} hcas_per_node={spec.hcas_per_node} leaves={spec.leaves} spines={spec.spines}",
        "",
    ]
    for spine, guid in layout.spines:
        out += [f"switchguid={guid}", f'Switch {spec.spine_ports} "{spine}"']
        out += [f'[{u.spine_port}] "{u.leaf}"[{u.leaf_port}]' for u in layout.uplinks if u.spine == spine]
        out.append("")
    for leaf, guid in layout.leaves:
        out += [f"switchguid={guid}", f'Switch {spec.leaf_ports} "{leaf}"']
        down = sorted((h for h in layout.hcas if h.leaf == leaf), key=lambda h: h.leaf_port)
        out += [f'[{h.leaf_port}] "{h.description}"[1]' for h in down]
        out += [f'[{u.leaf_port}] "{u.spine}"[{u.spine_port}]' for u in layout.uplinks if u.leaf == leaf]
        out.append("")
    for h in layout.hcas:
        out += [f"caguid={h.node_guid}", f'Hca 1 "{h.description}"', f'[1] "{h.leaf}"[{h.leaf_port}]', ""]
    return "\n".join(out)


def generate_netfile(
    nodes: int = 6, hcas_per_node: int = 2, *, nodes_per_leaf: int = 0, spines: int = 2, leaf_ports: int = 36
) -> str:
    """Convenience: ``render_netfile(plan_fabric(FabricSpec(...)))``."""
    return render_netfile(plan_fabric(FabricSpec(nodes, hcas_per_node, nodes_per_leaf, spines, leaf_ports)))


def storage_guid(guid: Guid) -> Guid:
    """The storage subnet's GUID of what is ``guid`` on the compute subnet's generator."""
    return Guid(guid.value + STORAGE_GUID_OFFSET)


def storage_netfile(nodes: int, sm_host: str = STORAGE_SM_HOST) -> str:
    """The storage subnet: one HCA per node (``mlx5_8``), its own SM node and GUIDs (module doc)."""
    text = generate_netfile(nodes, 1).replace(SM_DEVICE, STORAGE_DEVICE).replace(f'"{SM_HOST} ', f'"{sm_host} ')
    for base in (HCA_GUID_BASE, SPINE_GUID_BASE, LEAF_GUID_BASE):
        text = text.replace(f"{base:#018x}"[:11], f"{base + STORAGE_GUID_OFFSET:#018x}"[:11])
    return text
