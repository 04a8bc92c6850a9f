"""Pure parsers of ``fmpm`` (NVIDIA Fabric-Manager-Client) output, and FM's return codes.

Shapes follow fmpm.cpp (jsoncpp StyledWriter JSON: ``-l``, ``--list-unsupported-partitions``,
``--get-nvlink-failed-devices``); on failure fmpm prints e.g. ``Failed to activate partition.
fmReturn: -7`` and exits with that code (249 as a process status).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import ModuleId
from gpufabric.fabrics.nvlink.readers.fmreturn import FmReturn
from gpufabric.fabrics.nvlink.segments import MAX_PARTITIONS, Partition
from gpufabric.fabrics.nvlink.state import GpuInfo, NodeFm

_FMRETURN_RE: Final = re.compile(r"^(?P<what>.*?)\s*fmReturn:\s*(?P<code>-?\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class FmFailure:
    """One failed fmpm run: the FM return code (None if unknown) and what fmpm said."""

    code: int
    message: str

    @property
    def name(self) -> str:
        r = FmReturn.of(self.code)
        return f"FM_ST_{r.name}" if r is not None else f"fmReturn {self.code}"

    def describe(self) -> str:
        r = FmReturn.of(self.code)
        label = r.label if r is not None else "unknown code"
        return f"{self.message or 'fmpm failed'} ({self.name}: {label})"


def parse_failure(output: str, returncode: int) -> FmFailure:
    """The failure of an fmpm run from its output and exit status (``fmReturn: -7`` wins;
    otherwise the exit status read as a signed byte, e.g. 249 -> -7)."""
    text = output.strip()
    matches = list(_FMRETURN_RE.finditer(text))
    if matches:
        m = matches[-1]
        return FmFailure(int(m.group("code")), m.group("what").strip())
    if returncode > 127:
        code = returncode - 256  # fmpm returns fmReturn_t from main(): -7 exits as 249
    elif returncode < 0:
        code = int(FmReturn.GENERIC_ERROR)  # killed by a signal
    else:
        code = returncode
    return FmFailure(code, text.splitlines()[-1].strip() if text else "")


def _json(text: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValidationError(what, text[:80], "the JSON fmpm prints", str(e)) from None
    if not isinstance(data, dict):
        raise ValidationError(what, text[:80], "a JSON object")
    return data


def _int(what: str, raw: Any) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ValidationError(what, raw, "an integer")
    return raw


def parse_partition_list(text: str, node: str) -> NodeFm:
    """``fmpm -l``: the supported partitions, which are active, and each GPU's info."""
    data = _json(text, "fmpm -l")
    infos = data.get("partitionInfo")
    if not isinstance(infos, list):
        raise ValidationError("fmpm -l.partitionInfo", infos, "a list of partitions")
    n = _int("fmpm -l.numPartitions", data.get("numPartitions", len(infos)))
    if n != len(infos):
        raise ValidationError("fmpm -l.numPartitions", n, f"{len(infos)} (the partitions listed)")
    partitions: list[Partition] = []
    active: set[int] = set()
    gpus: dict[int, GpuInfo] = {}
    for i, p in enumerate(infos):
        where = f"fmpm -l.partitionInfo[{i}]"
        pid = _int(f"{where}.partitionId", p.get("partitionId"))
        if not 0 <= pid < MAX_PARTITIONS:
            raise ValidationError(f"{where}.partitionId", pid, f"0-{MAX_PARTITIONS - 1}")
        members: set[int] = set()
        for j, g in enumerate(p.get("gpuInfo") or []):
            mid = ModuleId.parse(_int(f"{where}.gpuInfo[{j}].physicalId", g.get("physicalId"))).value
            members.add(mid)
            gpus.setdefault(
                mid,
                GpuInfo(
                    module_id=mid,
                    pci_bus_id=str(g.get("pciBusId", "")),
                    uuid=str(g.get("uuid", "")),
                    links_available=int(g.get("numNvLinksAvailable", 0)),
                    links_max=int(g.get("maxNumNvLinks", 0)),
                ),
            )
        if len(members) != _int(f"{where}.numGpus", p.get("numGpus", len(members))):
            raise ValidationError(f"{where}.numGpus", p.get("numGpus"), f"{len(members)} (the GPUs listed)")
        partitions.append(Partition(pid, frozenset(members)))
        if p.get("isActive"):
            active.add(pid)
    if len({p.id for p in partitions}) != len(partitions):
        raise ValidationError("fmpm -l.partitionId", [p.id for p in partitions], "unique partition ids")
    return NodeFm(node, tuple(sorted(partitions)), frozenset(active), tuple(gpus[m] for m in sorted(gpus)))


def parse_unsupported(text: str) -> tuple[Partition, ...]:
    """``fmpm --list-unsupported-partitions``: partitions FM cannot activate (e.g. a GPU gone)."""
    data = _json(text, "fmpm --list-unsupported-partitions")
    out = []
    for i, p in enumerate(data.get("partitionInfo") or []):
        where = f"fmpm --list-unsupported-partitions.partitionInfo[{i}]"
        ids = [_int(f"{where}.gpuPhysicalIds", g) for g in p.get("gpuPhysicalIds") or []]
        out.append(Partition(_int(f"{where}.partitionId", p.get("partitionId")), frozenset(ids)))
    return tuple(sorted(out))


@dataclass(frozen=True)
class FailedDevice:
    """A GPU or NVSwitch with failed NVLink ports (``--get-nvlink-failed-devices``)."""

    kind: str  # "gpu" | "switch"
    uuid: str
    pci_bus_id: str
    ports: tuple[int, ...]


def parse_failed_devices(text: str) -> tuple[FailedDevice, ...]:
    data = _json(text, "fmpm --get-nvlink-failed-devices")
    out: list[FailedDevice] = []
    for kind, key in (("gpu", "gpuInfo"), ("switch", "switchInfo")):
        for i, d in enumerate(data.get(key) or []):
            ports = tuple(_int(f"fmpm --get-nvlink-failed-devices.{key}[{i}].portNum", x) for x in d.get("portNum") or [])
            out.append(FailedDevice(kind, str(d.get("uuid", "")), str(d.get("pciBusId", "")), ports))
    return tuple(out)


def norm_bus(bus: str) -> str:
    """A PCI bus id compared case-insensitively with an 8-digit domain (``0000:19:00.0`` and
    ``00000000:19:00.0`` are the same GPU)."""
    text = bus.strip().upper()
    parts = text.split(":")
    if len(parts) == 3:
        parts[0] = parts[0].rjust(8, "0")[-8:]
    return ":".join(parts)
