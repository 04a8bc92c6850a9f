"""Pure parsers of ``nvidia-smi -q`` (Module ID, PCI bus id, Fabric section), of a node's NVLink
domain in its Fabric section (:func:`smi_domain`), of ``pdsh``/``clush`` output (``host: line``,
:func:`parse_pdsh`) and of ``nvidia-smi nvlink -s`` (per-link speed or ``<inactive>``).

A node's NVLink domain: the GPUs of a multi-node NVLink system (GB200 NVL72) print the domain
they belong to in their Fabric section, ``ClusterUUID`` (the NVLink domain, a rack) and
``CliqueId`` (the clique of GPUs within it that can reach each other, e.g. a partition); two
GPUs talk over NVLink when both match (NVIDIA topograph keys its NVLink blocks the same way).
An HGX board (H100 8-GPU) is a domain of its own: its driver prints ``N/A`` (535: no lines at
all) or, from 565, CliqueId ``0`` and the all-zero ClusterUUID; each reads as "no multi-node
domain", :data:`BOARD`.

Module ID is the GPU's physical id, the id Fabric Manager's partitions are made of; it does
not follow PCI (or ``nvidia-smi`` index) order, so the Module ID <-> PCI bus map of a node
comes from here (or from ``fmpm -l``), never from enumeration order.

Real outputs: tests/fixtures/nvidia-smi/ holds an HGX H100 ``-q``; tests/fixtures/real/nvidia-smi-q/
holds seven more (thamada/nvidia-smi: an HGX H100 8-GPU on driver 565, whose "Module Id" sits
under "Platform Info", an HGX A100 with four GPUs, two PCIe H100 NVL that both report Module ID
4, ten PCIe A40 and eight RTX 6000 Ada that all report Module ID 1, so a Module ID alone does not
identify a GPU off an HGX baseboard; leptonai/gpud: two HGX H100 8-GPU on drivers 535.161.08 and
535.183.01, top-level "Module ID", Fabric printing State and Status only).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import ModuleId
from gpufabric.fabrics.nvlink.entries import NvlinkDomain, fabric_id, one_domain
from gpufabric.fabrics.nvlink.readers.fmpm import norm_bus

_GPU_RE: Final = re.compile(r"^GPU\s+(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")


@dataclass(frozen=True)
class SmiGpu:
    """One GPU of ``nvidia-smi -q``: its ids and its Fabric section."""

    pci_bus_id: str
    module_id: int | None
    uuid: str = ""
    state: str = ""
    status: str = ""
    clique_id: str = ""
    cluster_uuid: str = ""


def parse_smi_q(text: str) -> tuple[SmiGpu, ...]:
    """Every GPU block of ``nvidia-smi -q``: Module ID (or "Module Id"), Bus Id, Fabric."""
    gpus: list[SmiGpu] = []
    fields: dict[str, str] = {}
    bus = ""
    section: list[tuple[int, str]] = []

    def flush() -> None:
        if not bus:
            return
        raw_mid = next((v for k, v in fields.items() if k.endswith("module id")), "")
        mid: int | None = None
        if raw_mid and raw_mid.upper() != "N/A":
            mid = ModuleId.parse(raw_mid).value
        gpus.append(
            SmiGpu(
                pci_bus_id=norm_bus(fields.get("pci/bus id", bus)),
                module_id=mid,
                uuid=fields.get("gpu uuid", ""),
                state=fields.get("fabric/state", ""),
                status=fields.get("fabric/status", ""),
                clique_id=fields.get("fabric/cliqueid", ""),
                cluster_uuid=fields.get("fabric/clusteruuid", ""),
            )
        )

    for line in text.splitlines():
        m = _GPU_RE.match(line)
        if m:
            flush()
            bus, fields, section = m.group("bus"), {}, []
            continue
        if not bus or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        while section and section[-1][0] >= indent:
            section.pop()
        if ":" in line:
            key, _, value = line.strip().partition(":")
            path = "/".join([s for _, s in section] + [key.strip().lower()])
            fields.setdefault(path, value.strip())
        else:
            section.append((indent, line.strip().lower()))
    flush()
    if not gpus and text.strip():
        raise ValidationError("nvidia-smi -q", text[:80], "nvidia-smi -q output with 'GPU <bus id>' blocks")
    return tuple(gpus)


_FABRIC_LINE_RE: Final = re.compile(r"^\s*(?P<key>ClusterUUID|CliqueId)\s*:\s*(?P<value>.*?)\s*$")


def smi_domain(node: str, text: str) -> NvlinkDomain:
    """``node``'s NVLink domain from its ``nvidia-smi -q``: the whole output (each GPU's Fabric
    section) or only its ``CliqueId``/``ClusterUUID`` lines (``nvidia-smi -q | grep -E
    'CliqueId|ClusterUUID'``, what topograph collects), paired in order. No such lines (driver
    535): its board. ValidationError naming the field for a bad value or GPUs that disagree."""
    where = f"nvidia-smi -q of {node}"
    if any(_GPU_RE.match(line) for line in text.splitlines()):
        gpus = parse_smi_q(text)
        return one_domain(node, ((g.pci_bus_id, fabric_id(g.cluster_uuid, g.clique_id, f"{where}: GPU {g.pci_bus_id}"))
                                 for g in gpus), f"{where}: Fabric")  # fmt: skip
    lines = [(m.group("key"), m.group("value")) for line in text.splitlines() if (m := _FABRIC_LINE_RE.match(line))]
    uuids = [v for k, v in lines if k == "ClusterUUID"]
    cliques = [v for k, v in lines if k == "CliqueId"]
    if not lines and text.strip():
        raise ValidationError(where, text.strip()[:80], "nvidia-smi -q output: 'GPU <bus id>' blocks or CliqueId/ClusterUUID lines")
    if len(uuids) != len(cliques):
        raise ValidationError(f"{where}: Fabric", f"{len(uuids)} ClusterUUID, {len(cliques)} CliqueId lines",
                              "one CliqueId and one ClusterUUID line per GPU")  # fmt: skip
    return one_domain(node, ((f"GPU {k}", fabric_id(u, c, f"{where}: GPU {k}")) for k, (u, c) in enumerate(zip(uuids, cliques, strict=True))),
                      f"{where}: Fabric")  # fmt: skip


_PDSH_RE: Final = re.compile(r"^(?P<host>[A-Za-z0-9][A-Za-z0-9_.-]*): ?(?P<line>.*)$")


def parse_pdsh(text: str) -> dict[str, str]:
    """``pdsh -w HOSTS CMD`` (or ``clush -w``) output: host -> its lines, each printed as ``host: line``,
    in order (hosts interleave). A line without a host prefix is a ValidationError naming its number."""
    out: dict[str, list[str]] = {}
    for k, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _PDSH_RE.match(line)
        if m is None:
            raise ValidationError(f"line {k}", line[:80], "pdsh/clush output: 'HOST: LINE'")
        out.setdefault(m.group("host"), []).append(m.group("line"))
    return {h: "\n".join(lines) + "\n" for h, lines in out.items()}


def pdsh_text(outputs: Sequence[tuple[str, str]]) -> str:
    """``(host, output)`` pairs as pdsh prints them (``host: line``): what :func:`parse_pdsh` reads."""
    return "".join(f"{h}: {line}\n" for h, text in outputs for line in text.splitlines())


@dataclass(frozen=True)
class GpuLinks:
    """One GPU of ``nvidia-smi nvlink -s``: link number -> GB/s (None: inactive)."""

    index: int
    name: str
    uuid: str
    links: tuple[tuple[int, float | None], ...]

    @property
    def active_links(self) -> int:
        return sum(1 for _, speed in self.links if speed is not None)


_NVGPU_RE: Final = re.compile(r"^GPU\s+(?P<index>\d+):\s*(?P<name>.*?)\s*\(UUID:\s*(?P<uuid>[^)]*)\)\s*$")
_LINK_RE: Final = re.compile(r"^\s*Link\s+(?P<link>\d+):\s*(?P<value>.*?)\s*$")


def parse_nvlink_status(text: str) -> tuple[GpuLinks, ...]:
    out: list[GpuLinks] = []
    cur: tuple[int, str, str] | None = None
    links: list[tuple[int, float | None]] = []
    for line in text.splitlines():
        if m := _NVGPU_RE.match(line):
            if cur is not None:
                out.append(GpuLinks(*cur, tuple(links)))
            cur, links = (int(m.group("index")), m.group("name"), m.group("uuid")), []
        elif (lm := _LINK_RE.match(line)) and cur is not None:
            value = lm.group("value")
            speed = re.match(r"^([0-9.]+)\s*GB/s$", value)
            if speed is None and value != "<inactive>":
                raise ValidationError("nvidia-smi nvlink -s.link", value, "'<n> GB/s' or '<inactive>'")
            links.append((int(lm.group("link")), float(speed.group(1)) if speed else None))
    if cur is not None:
        out.append(GpuLinks(*cur, tuple(links)))
    return tuple(out)
