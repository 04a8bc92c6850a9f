"""Pure parsers of ``nvidia-smi -q`` (Module ID, PCI bus id, Fabric section) and
``nvidia-smi nvlink -s`` (per-link speed or ``<inactive>``).

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
from dataclasses import dataclass
from typing import Final

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import ModuleId
from gpufabric.fabrics.nvlink.fmpm_parse import norm_bus

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
