"""A node's InfiniBand entries in the inventory: the InfiniBand kind's own column of the node port table.

A node's HCA ports, on every InfiniBand instance (subnet), come from its ``ib: [...]`` key
(:attr:`InfinibandKind.inventory_key`; ``fabrics: {infiniband: [...]}`` is the same list) and
are kept in one row, on the kind's default instance ``infiniband``. Each entry is a mapping with
``device`` (e.g. ``mlx5_0``), ``port_guid`` and ``node_guid`` (required), ``port_num`` (default
1), ``switch_guid``/``switch_port`` (where it is cabled), ``instance``: the subnet the port is
on (unset: the default instance), and ``gpu``: the GPU module id (1-64) whose rail the HCA is
(issue 33: on a shared host the port carries the PKeys of the slot holding that GPU; read from
``nvidia-smi topo -m`` by the ``nvidia-smi-topo`` import, :mod:`.inventory.affinity`). A ``fabrics: {<ib-instance>: [...]}`` section is refused,
naming the ``ib:`` form: one list says where every HCA port of a node is, so one port can never
be listed on two subnets. :func:`ib_ports` gives a node's ports on one subnet. What no two nodes
may share, the port GUIDs and the node GUIDs of their HCAs, are the node's :func:`ib_keys`
(unique in the store by a database constraint)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from gpufabric.domain.entries import checked, listed, mapping, node_entries, required, text, unique
from gpufabric.domain.errors import ValidationError
from gpufabric.domain.models import FabricPorts, Node, PortKey
from gpufabric.domain.topology import MAX_TIERS, SwitchPath, check_path
from gpufabric.domain.values import Guid, check_name

KIND: Final = "infiniband"
"""The kind's name (:attr:`InfinibandKind.name`): its default instance, where ``ib:`` entries are kept."""
KEYS: Final = frozenset({"device", "port_num", "port_guid", "node_guid", "switch_guid", "switch_port", "instance", "path", "gpu"})
GPU_MAX: Final = 64
"""The highest GPU module id an HCA port's ``gpu`` may name."""
_GUID: Final = {"type": ["string", "integer"], "description": "64-bit GUID, e.g. 0x0002c90300000001"}
ENTRY_SCHEMA: Final = {
    "type": "object", "additionalProperties": False, "required": ["device", "port_guid", "node_guid"],
    "properties": {
        "device": {"type": "string", "description": "the HCA, e.g. mlx5_0"},
        "port_num": {"type": "integer", "minimum": 1, "maximum": 254, "default": 1},
        "port_guid": _GUID, "node_guid": _GUID, "switch_guid": _GUID,
        "switch_port": {"type": "integer", "minimum": 1, "maximum": 254},
        "instance": {"type": "string", "description": "the subnet (InfiniBand instance) it is on; unset: the default one"},
        "gpu": {"type": "integer", "minimum": 1, "maximum": 64,
                "description": "the GPU module id whose rail HCA this is (a shared host's slots get their GPUs' rails)"},
        "path": {"type": "array", "maxItems": MAX_TIERS, "items": {"type": "array", "items": {"type": "string"}},
                 "description": "the switches above the port, tier by tier, its leaf first (an ibnetdiscover "
                 "import finds them), e.g. [[leaf-01], [spine-01, spine-02]]"},
    },
}
"""One entry as the API's OpenAPI schema shows it (:func:`parse_ib` checks it)."""
PORT_GUID: Final = f"{KIND}.port_guid"
NODE_GUID: Final = f"{KIND}.node_guid"


@dataclass(frozen=True)
class IbPort:
    """An HCA port on the InfiniBand fabric, matched to its node by node description."""

    node: str
    device: str  # e.g. mlx5_0
    port_num: int
    port_guid: Guid
    node_guid: Guid
    switch_guid: Guid | None = None
    switch_port: int | None = None
    instance: str = ""  # the fabric instance (subnet) it is cabled to; "": the kind's default instance
    path: SwitchPath = ()  # the switches above it, tier by tier, its leaf first (uplinks.leaf_paths); (): unknown
    gpu: int | None = None  # the GPU module id (1-64) whose rail this HCA is; None: no affinity recorded

    def __post_init__(self) -> None:
        check_name("ib_port.node", self.node)
        if self.instance:
            check_name("ib_port.instance", self.instance)
        if not 1 <= self.port_num <= 254:
            raise ValidationError("ib_port.port_num", self.port_num, "1-254")
        if self.switch_port is not None and not 1 <= self.switch_port <= 254:
            raise ValidationError("ib_port.switch_port", self.switch_port, "1-254")
        if self.gpu is not None and not 1 <= self.gpu <= GPU_MAX:
            raise ValidationError("ib_port.gpu", self.gpu, f"a GPU module id 1-{GPU_MAX}")

    @property
    def subnet(self) -> str:
        """The instance this port is on (its ``instance``, else the default one)."""
        return self.instance or KIND


# ---------------------------------------------------------------------- reading entries
def parse_ib(node: str, raw: Any, where: str, instance: str = KIND) -> tuple[IbPort, ...]:
    """A node's entries at ``where`` (a list), each checked, one entry per device/port_num; sorted
    by device and port. ``instance``: the instance whose section ``where`` is (only the default
    one keeps entries)."""
    if instance != KIND:
        raise ValidationError(where, "...", f"the node's ib: list, with instance: {instance} on each of its ports "
                              "(one list holds a node's HCA ports on every InfiniBand instance)")  # fmt: skip
    found = [_entry(f"{where}[{k}]", node, r) for k, r in enumerate(listed(where, raw))]
    first: dict[tuple[str, Any], str] = {}
    for k, p in enumerate(found):
        unique(first, ("hca", (p.device, p.port_num)), f"{where}[{k}].device", f"{p.device}/{p.port_num}",
               "device/port_num per node")  # fmt: skip
    return tuple(sorted(found, key=lambda p: (p.device, p.port_num)))


def _entry(path: str, node: str, raw: Any) -> IbPort:
    m = mapping(path, raw, KEYS)
    device = text(f"{path}.device", required(path, m, "device"), "the HCA device name, e.g. mlx5_0")
    port_num = _int(f"{path}.port_num", m.get("port_num", 1), 1, 254)
    port_guid = _guid(f"{path}.port_guid", required(path, m, "port_guid"))
    node_guid = _guid(f"{path}.node_guid", required(path, m, "node_guid"))
    sw_guid = None if m.get("switch_guid") is None else _guid(f"{path}.switch_guid", m["switch_guid"])
    sw_port = None if m.get("switch_port") is None else _int(f"{path}.switch_port", m["switch_port"], 1, 254)
    instance = m.get("instance") or ""  # the IB fabric instance (subnet); "": the default one
    if instance:
        checked(f"{path}.instance", instance, lambda: check_name(f"{path}.instance", instance))
    up = check_path(f"{path}.path", m["path"]) if m.get("path") is not None else ()
    gpu = None if m.get("gpu") is None else _int(f"{path}.gpu", m["gpu"], 1, GPU_MAX)
    return IbPort(node, device, port_num, port_guid, node_guid, sw_guid, sw_port, instance, up, gpu)


def _int(path: str, raw: Any, lo: int, hi: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not lo <= raw <= hi:
        raise ValidationError(path, raw, f"an integer {lo}-{hi}")
    return raw


def _guid(path: str, raw: Any) -> Guid:
    if isinstance(raw, bool) or not isinstance(raw, (int, str)):
        raise ValidationError(path, raw, Guid.ALLOWED)
    g = Guid.parse(raw, field=path)
    if g.value in (0, 0xFFFF_FFFF_FFFF_FFFF):
        raise ValidationError(path, raw, f"{Guid.ALLOWED}, not 0 and not all ones", "reserved GUID")
    return g


# ---------------------------------------------------------------------- stored entries
def dump_ib(ports: tuple[IbPort, ...]) -> list[dict[str, Any]]:
    """The JSON entries :func:`parse_ib` reads back as ``ports``."""
    return [{"device": p.device, "port_num": p.port_num, "port_guid": str(p.port_guid), "node_guid": str(p.node_guid),
             **({"switch_guid": str(p.switch_guid)} if p.switch_guid else {}),
             **({"switch_port": p.switch_port} if p.switch_port else {}),
             **({"instance": p.instance} if p.instance else {}),
             **({"path": [list(t) for t in p.path]} if p.path else {}),
             **({"gpu": p.gpu} if p.gpu is not None else {})} for p in ports]  # fmt: skip


def ib_keys(ports: tuple[IbPort, ...]) -> tuple[PortKey, ...]:
    """What ``ports`` (one node's) hold: each port GUID, and each HCA's node GUID once."""
    out: dict[tuple[str, str], PortKey] = {}
    for k, p in enumerate(ports):
        g, n = str(p.port_guid), str(p.node_guid)
        out.setdefault((PORT_GUID, g), PortKey(PORT_GUID, g, f"[{k}].port_guid", "port GUIDs",
                                               f"port GUID {g} (node {p.node} {p.device}/{p.port_num})"))
        out.setdefault((NODE_GUID, n), PortKey(NODE_GUID, n, f"[{k}].node_guid", "node GUIDs per node",
                                               f"node GUID {n} (node {p.node} {p.device})"))
    return tuple(out.values())


def ib_ports(node: Node, instance: str = KIND) -> tuple[IbPort, ...]:
    """``node``'s HCA ports on the IB instance (subnet) ``instance``."""
    return tuple(p for p in all_ib_ports(node) if p.subnet == instance)


def all_ib_ports(node: Node) -> tuple[IbPort, ...]:
    """Every HCA port of ``node``, on every instance."""
    return node_entries(node, KIND, parse_ib)


def check_rails(host: Node, modules: frozenset[int]) -> None:
    """Refuse a slot of ``host`` holding GPU modules ``modules`` when one of them has no rail HCA
    (no HCA port of ``host`` with that ``gpu``), only when ``host`` has HCA ports at all: its VM
    would get no InfiniBand for that GPU. ``ValidationError`` naming ``infiniband.gpu``."""
    ports = all_ib_ports(host)
    if not ports:
        return
    railed = {p.gpu for p in ports if p.gpu is not None}
    missing = sorted(m for m in modules if m not in railed)
    if missing:
        have = ", ".join(map(str, sorted(railed))) or "none"
        raise ValidationError(
            f"{KIND}.gpu", missing[0], f"GPUs with a rail HCA in {host.name}'s inventory ({have})",
            f"GPU {missing[0]} of {host.name} has no rail HCA (no ib: port with gpu: {missing[0]}; "
            "import its nvidia-smi topo -m with --format nvidia-smi-topo)",
        )  # fmt: skip


def with_ib(node: Node, *ports: IbPort) -> Node:
    """``node`` with ``ports`` as its HCA ports, on every instance (tests, the lab, importers)."""
    mine = tuple(sorted(ports, key=lambda p: (p.device, p.port_num)))
    return node.with_ports(FabricPorts.of(KIND, dump_ib(mine), ib_keys(mine)))
