"""A node's GPUs in the inventory: the NVLink kind's own column of the generic port table.

A node's GPUs come from its ``gpus: [...]`` key (:attr:`NvlinkKind.inventory_key`, the kind's
default instance ``nvlink``) or from ``fabrics: {<instance>: [...]}``. Each entry is a mapping
with ``module_id`` (Fabric Manager's physical module id, 1-64, unique on the node) and an
optional ``pci_bus_id`` (``DOMAIN:BUS:DEVICE.FUNCTION``, kept in lower case), and the NVLink
domain the GPU reports (``cluster_uuid`` and ``clique_id``, both or neither: what ``inventory
import --format nvidia-smi`` records from its Fabric section; every GPU of a node in one domain).
``parse_gpus`` checks them and ``dump_gpus`` writes back what it reads (the stored JSON).

The NVLink domain itself (:class:`NvlinkDomain`, the ClusterUUID/CliqueId rules of
:func:`fabric_id`, one domain per node: :func:`one_domain`) lives here too: the inventory
entries and the ``nvidia-smi -q`` reader (``readers/smi.py``) check it by the same rules."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from gpufabric.domain.entries import listed, mapping, node_entries, required
from gpufabric.domain.errors import ValidationError
from gpufabric.domain.models import FabricPorts, Node
from gpufabric.domain.values import ModuleId
from gpufabric.fabrics.nvlink.state import FABRIC

ZERO_UUID: Final = "00000000-0000-0000-0000-000000000000"
CLIQUE_MAX: Final = 0xFFFF_FFFF  # NVML's nvmlGpuFabricInfo_t.cliqueId is an unsigned int
UUID_ALLOWED: Final = "a UUID (8-4-4-4-12 hex digits), or N/A"
CLIQUE_ALLOWED: Final = f"an integer 0-{CLIQUE_MAX}, or N/A"
SMI: Final = "nvidia-smi"
BOARD: Final = "board"
_UUID_RE: Final = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_NONE: Final = frozenset({"", "n/a"})
_DIGITS_RE: Final = re.compile(r"[0-9]{1,20}")  # ASCII digits only: str.isdigit() takes "²", which int() refuses


@dataclass(frozen=True)
class NvlinkDomain:
    """The NVLink domain ``node`` is in: the multi-node one its GPUs report (``cluster_uuid`` and
    ``clique_id``, source ``nvidia-smi``), or none reported: its own board (source ``board``).
    ``id`` names it for every node (and, later, every slot of a node) that shares it."""

    node: str
    cluster_uuid: str = ""
    clique_id: int | None = None

    @property
    def source(self) -> str:
        return SMI if self.cluster_uuid else BOARD

    @property
    def id(self) -> str:
        return f"{self.cluster_uuid}/{self.clique_id}" if self.cluster_uuid else f"{BOARD}:{self.node}"

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "cluster_uuid": self.cluster_uuid or None, "clique_id": self.clique_id, "source": self.source}


def fabric_id(cluster_uuid: str, clique_id: str, where: str, names: tuple[str, str] = ("ClusterUUID", "CliqueId")) -> tuple[str, int | None]:
    """One GPU's (ClusterUUID, CliqueId) as printed, checked: ``("", None)`` when it reports no
    multi-node domain (N/A, absent, or the all-zero ClusterUUID of an HGX board); a
    ValidationError naming ``<where>.<names[0]>``/``.<names[1]>`` and the allowed range otherwise."""
    uuid, clique = cluster_uuid.strip().lower(), clique_id.strip().lower()
    if uuid in _NONE or uuid == ZERO_UUID:
        if clique not in _NONE and not (_DIGITS_RE.fullmatch(clique) and int(clique) <= CLIQUE_MAX):
            raise ValidationError(f"{where}.{names[1]}", clique_id, CLIQUE_ALLOWED)
        return "", None
    if not _UUID_RE.fullmatch(uuid):
        raise ValidationError(f"{where}.{names[0]}", cluster_uuid, UUID_ALLOWED)
    if not _DIGITS_RE.fullmatch(clique) or int(clique) > CLIQUE_MAX:
        raise ValidationError(f"{where}.{names[1]}", clique_id, f"an integer 0-{CLIQUE_MAX} ({names[0]} {uuid} is set)")
    return uuid, int(clique)


def one_domain(node: str, ids: Iterable[tuple[str, tuple[str, int | None]]], where: str) -> NvlinkDomain:
    """The one NVLink domain of ``node`` from each GPU's ``(label, (cluster_uuid, clique_id))``:
    every GPU of a node is in the same domain (a ValidationError naming ``where`` and the GPUs
    that differ otherwise); none reported: its board."""
    seen: dict[tuple[str, int | None], list[str]] = {}
    for label, fid in ids:
        seen.setdefault(fid, []).append(label)
    if len(seen) > 1:
        said = "; ".join(f"{', '.join(who)}: {_said(fid)}" for fid, who in seen.items())
        raise ValidationError(where, said, "every GPU of a node in one NVLink domain", f"node {node}")
    cluster, clique = next(iter(seen), ("", None))
    return NvlinkDomain(node, cluster, clique)


def _said(fid: tuple[str, int | None]) -> str:
    return f"{fid[0]}/{fid[1]}" if fid[0] else "none"


KEYS: Final = frozenset({"module_id", "pci_bus_id", "cluster_uuid", "clique_id"})
PCI_ALLOWED: Final = "a PCI address DOMAIN:BUS:DEVICE.FUNCTION, e.g. 0000:18:00.0"
_PCI_RE: Final = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


@dataclass(frozen=True)
class Gpu:
    """One GPU of a node, by the module id Fabric Manager partitions name it by."""

    node: str
    module_id: ModuleId
    pci_bus_id: str = ""
    cluster_uuid: str = ""  # the multi-node NVLink domain it reports ("": none, its board)
    clique_id: int | None = None


def parse_gpu(path: str, node: str, raw: Any) -> Gpu:
    """One entry at ``path`` (e.g. ``nodes[2].gpus[0]``) of node ``node``."""
    raw = mapping(path, raw, KEYS)
    module = required(path, raw, "module_id")
    if isinstance(module, bool) or not isinstance(module, int) or not 1 <= module <= 64:
        raise ValidationError(f"{path}.module_id", module, "an integer 1-64")
    pci = raw.get("pci_bus_id", "")
    if pci != "":
        if not isinstance(pci, str) or not _PCI_RE.fullmatch(pci.strip().lower()):
            raise ValidationError(f"{path}.pci_bus_id", raw["pci_bus_id"], PCI_ALLOWED)
        pci = pci.strip().lower()
    cluster, clique = raw.get("cluster_uuid", ""), raw.get("clique_id")
    if cluster or clique is not None:
        if not isinstance(cluster, str) or not cluster:
            raise ValidationError(f"{path}.cluster_uuid", cluster, "a UUID (with clique_id)")
        if isinstance(clique, bool) or not isinstance(clique, int) or not 0 <= clique <= CLIQUE_MAX:
            raise ValidationError(f"{path}.clique_id", clique, f"an integer 0-{CLIQUE_MAX} (with cluster_uuid)")
        cluster, clique = fabric_id(cluster, str(clique), path, ("cluster_uuid", "clique_id"))
        if not cluster:
            raise ValidationError(f"{path}.cluster_uuid", raw["cluster_uuid"], "a UUID other than the all-zero one")
    return Gpu(node, ModuleId(module), pci, cluster, clique)


def parse_gpus(node: str, raw: Any, where: str) -> tuple[Gpu, ...]:
    """A node's entries at ``where`` (a list), each checked, module ids unique on the node; by module id."""
    out: dict[int, Gpu] = {}
    at: dict[int, int] = {}
    for k, entry in enumerate(listed(where, raw)):
        g = parse_gpu(f"{where}[{k}]", node, entry)
        if g.module_id.value in out:
            raise ValidationError(f"{where}[{k}].module_id", g.module_id.value,
                                  f"unique module ids per node (also at {where}[{at[g.module_id.value]}].module_id)",
                                  "duplicate")  # fmt: skip
        out[g.module_id.value], at[g.module_id.value] = g, k
    gpus = tuple(out[m] for m in sorted(out))
    one_domain(node, ((f"module {g.module_id.value}", (g.cluster_uuid, g.clique_id)) for g in gpus), f"{where}[].cluster_uuid")
    return gpus


def dump_gpus(gpus: tuple[Gpu, ...]) -> list[dict[str, Any]]:
    """The JSON entries ``parse_gpus`` reads back as ``gpus``."""
    return [
        {"module_id": g.module_id.value, **({"pci_bus_id": g.pci_bus_id} if g.pci_bus_id else {}),
         **({"cluster_uuid": g.cluster_uuid, "clique_id": g.clique_id} if g.cluster_uuid else {})}
        for g in gpus
    ]  # fmt: skip


def node_domain(node: str, gpus: tuple[Gpu, ...]) -> NvlinkDomain:
    """The NVLink domain of ``node`` from its GPUs' entries (parse_gpus keeps them in one): the
    multi-node domain they report, or none: its board."""
    first = gpus[0] if gpus else None
    return NvlinkDomain(node, first.cluster_uuid, first.clique_id) if first is not None else NvlinkDomain(node)


def gpu_ports(*gpus: Gpu, instance: str = FABRIC) -> tuple[FabricPorts, ...]:
    """A node's ``fabric_ports`` holding ``gpus`` on ``instance`` (none: no entry)."""
    return (FabricPorts.of(instance, dump_gpus(tuple(sorted(gpus, key=lambda g: g.module_id.value)))),) if gpus else ()


def node_gpus(node: Node, instance: str = FABRIC) -> tuple[Gpu, ...]:
    """``node``'s GPUs on NVLink instance ``instance`` (those of its ``gpus:`` key when it has
    none of its own there: :func:`~gpufabric.domain.fabric.node_entries`)."""
    return node_entries(node, instance, parse_gpus, FABRIC)
