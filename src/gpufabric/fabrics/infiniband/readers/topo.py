"""Pure parser of ``nvidia-smi topo -m`` (the GPU / NIC connection matrix) and the GPU <-> HCA
rail affinity read from it.

The output is a square matrix over the devices of the node: GPUs (``GPU0``..) then NICs, named
``NIC0``.. with a trailing "NIC Legend:" block (``NIC0: mlx5_0``) in newer drivers, or named by
their RDMA device (``mlx5_0``) directly in older ones. Each cell is the connection between two
devices: ``X`` (self), ``NV#`` (a bonded set of # NVLinks), ``PIX`` (at most one PCIe bridge:
the same PCIe switch), ``PXB`` (several bridges, no host bridge), ``PHB`` (through a PCIe host
bridge), ``NODE`` (between host bridges of one NUMA node), ``SYS`` (across NUMA nodes; ``SOC`` in
old drivers), ``NVB`` (through an NVLink bridge). GPU rows end with their CPU Affinity, NUMA
Affinity and (newer drivers) GPU NUMA ID. Older drivers separate cells by tabs, newer ones pad
with spaces; both are read, with or without the ANSI underline a terminal gets, CRLF or LF.

A GPU's rail HCAs are the NICs at ``PIX`` from it (HGX H100/H200: one ConnectX-7 per GPU, on
the GPU's PCIe switch): :func:`gpu_rails` gives them, and reports as values (not errors) the
GPUs with no such NIC and the NICs two GPUs claim, so the caller decides what is an error.

Real outputs: tests/fixtures/real/nvidia-smi-topo/ (see its manifests).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from gpufabric.domain.errors import ValidationError

WHAT: Final = "nvidia-smi topo -m"
LINKS: Final = "X, SYS, SOC, NODE, PHB, PXB, PIX, NVB or NV<n>"
ATTRIBUTES: Final = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")

_ANSI: Final = re.compile(r"\x1b\[[0-9;]*m")
_GPU: Final = re.compile(r"GPU(\d+)\Z")
_NIC_LABEL: Final = re.compile(r"NIC(\d+)\Z")
_DEVICE: Final = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]*\Z")
_LINK: Final = re.compile(r"(X|SYS|SOC|NODE|PHB|PXB|PIX|NVB|NV\d+)\Z")
_LEGEND_ENTRY: Final = re.compile(r"\s+(?:X|NV#|[A-Z]+)\s*=\s")
_NIC_ENTRY: Final = re.compile(r"\s*(NIC\d+):\s*(\S+)\s*\Z")
_CPUS: Final = re.compile(r"(\d+(-\d+)?)(,\d+(-\d+)?)*\Z")
_NUMA: Final = re.compile(r"(\d+|N/A)\Z")


@dataclass(frozen=True)
class TopoGpu:
    """One GPU row: its index (``GPU<index>``) and affinities as printed ("" when absent)."""

    index: int
    cpu_affinity: str = ""
    numa_affinity: str = ""
    gpu_numa_id: str = ""


@dataclass(frozen=True)
class TopoNic:
    """One NIC: the label of its column (``NIC3`` or ``mlx5_3``) and its RDMA device name."""

    label: str
    device: str


@dataclass(frozen=True)
class TopoMatrix:
    """The parsed matrix: ``labels`` are the columns in printed order (GPUs first), ``cells`` the
    rows in the same order."""

    gpus: tuple[TopoGpu, ...]
    nics: tuple[TopoNic, ...]
    labels: tuple[str, ...]
    cells: tuple[tuple[str, ...], ...]

    def link(self, a: str, b: str) -> str:
        """The connection between two columns by label (``GPU0``, ``NIC1``, ``mlx5_2``) or, for a
        NIC, by device name."""
        return self.cells[self._col(a)][self._col(b)]

    def gpu_link(self, a: int, b: int) -> str:
        return self.link(f"GPU{a}", f"GPU{b}")

    def nic(self, name: str) -> TopoNic:
        """A NIC by label or device name (``NIC0`` or ``mlx5_0``)."""
        for n in self.nics:
            if name in (n.label, n.device):
                return n
        raise KeyError(name)

    def _col(self, name: str) -> int:
        if name in self.labels:
            return self.labels.index(name)
        return self.labels.index(self.nic(name).label)


@dataclass(frozen=True)
class GpuRail:
    """A GPU and the RDMA devices of the NICs at an allowed link from it (PIX by default)."""

    gpu: int
    hcas: tuple[str, ...]


@dataclass(frozen=True)
class SharedNic:
    """A NIC that more than one GPU reaches at an allowed link: it is no one GPU's rail."""

    hca: str
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class RailAffinity:
    """Each GPU's rail HCAs, plus what the caller may refuse: GPUs with none, shared NICs."""

    rails: tuple[GpuRail, ...]
    gpus_without_rail: tuple[int, ...]
    shared_nics: tuple[SharedNic, ...]

    def hcas_of(self, gpu: int) -> tuple[str, ...]:
        return next((r.hcas for r in self.rails if r.gpu == gpu), ())


def _refuse(lineno: int, line: str, allowed: str, reason: str) -> ValidationError:
    return ValidationError(f"{WHAT} line {lineno}", line.strip(), allowed, reason)


def _header(lineno: int, line: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The device columns and the attribute columns of the header line."""
    found = sorted((line.find(name), name) for name in ATTRIBUTES if name in line)
    cut = found[0][0] if found else len(line)
    labels = tuple(line[:cut].split())
    tail = line[cut:]
    for _, name in found:
        tail = tail.replace(name, " ", 1)
    if not labels or labels[0] != "GPU0" or tail.strip():
        raise _refuse(
            lineno,
            line,
            "GPU0.. and NIC columns, then CPU Affinity / NUMA Affinity / GPU NUMA ID",
            "not the matrix header",
        )
    for label in labels:
        if _LINK.match(label):
            raise _refuse(lineno, line, "the header line (GPU0 GPU1 ... CPU Affinity) first", "a matrix row, no header")
        if not _DEVICE.match(label):
            raise _refuse(lineno, line, "device names (GPU<n>, NIC<n>, mlx5_<n>)", f"column {label!r}")
    if len(set(labels)) != len(labels):
        raise _refuse(lineno, line, "distinct column names", "a column is named twice")
    return labels, tuple(name for _, name in found)


def _attributes(lineno: int, line: str, values: list[str], attrs: tuple[str, ...]) -> dict[str, str]:
    if len(values) > len(attrs):
        raise _refuse(
            lineno, line, f"{len(attrs)} values after the links ({', '.join(attrs) or 'none'})", "too many cells"
        )
    out = dict(zip(attrs, values, strict=False))
    cpus = out.get("CPU Affinity", "")
    if cpus and cpus != "N/A" and not _CPUS.match(cpus):
        raise _refuse(lineno, line, "a CPU list such as 0-47,96-143", f"CPU Affinity {cpus!r}")
    for key in ("NUMA Affinity", "GPU NUMA ID"):
        if out.get(key) and not _NUMA.match(out[key]):
            raise _refuse(lineno, line, "a NUMA node number or N/A", f"{key} {out[key]!r}")
    return out


def parse_topo_matrix(text: str) -> TopoMatrix:
    """Read ``nvidia-smi topo -m``: the header, one row per column, the legend, the NIC legend.

    Refuses (``ValidationError`` naming the line) a missing header, a row that does not follow
    the header's order, an unknown link, a non-X diagonal, an asymmetric matrix, an unknown line
    after the matrix, and a ``NIC<n>`` column the NIC Legend does not name.
    """
    lines = _ANSI.sub("", text).splitlines()
    numbered = [(i, ln) for i, ln in enumerate(lines, 1)]
    start = next((k for k, (_, ln) in enumerate(numbered) if ln.strip()), None)
    if start is None:
        raise ValidationError(WHAT, text[:80], "the matrix nvidia-smi topo -m prints", "empty output")
    lineno, line = numbered[start]
    labels, attrs = _header(lineno, line)
    n = len(labels)
    rows: list[tuple[str, ...]] = []
    gpus: list[TopoGpu] = []
    k = start + 1
    while k < len(numbered) and len(rows) < n:
        lineno, line = numbered[k]
        k += 1
        tokens = line.split()
        if not tokens:
            break
        want = labels[len(rows)]
        if tokens[0] != want:
            raise _refuse(lineno, line, f"the row of {want} (rows in the header's order)", f"row {tokens[0]!r}")
        cells = tokens[1 : n + 1]
        if len(cells) < n:
            raise _refuse(lineno, line, f"{n} links", f"{len(cells)} cells")
        for cell in cells:
            if not _LINK.match(cell):
                raise _refuse(lineno, line, LINKS, f"link {cell!r}")
        if cells[len(rows)] != "X":
            raise _refuse(lineno, line, "X on the diagonal", f"{want} to itself is {cells[len(rows)]!r}")
        gpu = _GPU.match(want)
        extra = _attributes(lineno, line, tokens[n + 1 :], attrs if gpu else ())
        if gpu:
            gpus.append(
                TopoGpu(
                    index=int(gpu.group(1)),
                    cpu_affinity=extra.get("CPU Affinity", ""),
                    numa_affinity=extra.get("NUMA Affinity", ""),
                    gpu_numa_id=extra.get("GPU NUMA ID", ""),
                )
            )
        rows.append(tuple(cells))
    if len(rows) < n:
        missing = labels[len(rows)]
        raise ValidationError(
            WHAT, missing, f"one row per column ({', '.join(labels)})", f"the row of {missing} is missing"
        )
    for i in range(n):
        for j in range(i):
            if rows[i][j] != rows[j][i]:
                where = numbered[start + 1 + i]
                raise _refuse(
                    where[0],
                    where[1],
                    "a symmetric matrix",
                    f"{labels[i]}-{labels[j]} {rows[i][j]} but {labels[j]}-{labels[i]} {rows[j][i]}",
                )
    legend = _legends(numbered[k:])
    nics: list[TopoNic] = []
    for label in labels:
        if _GPU.match(label):
            continue
        if _NIC_LABEL.match(label):
            if label not in legend:
                raise ValidationError(
                    f"{WHAT} NIC Legend",
                    label,
                    "an entry NIC<n>: <device> for every NIC column",
                    "not in the NIC Legend",
                )
            nics.append(TopoNic(label, legend.pop(label)))
        else:
            nics.append(TopoNic(label, label))
    if legend:
        extra_nic = sorted(legend)[0]
        raise ValidationError(f"{WHAT} NIC Legend", extra_nic, "NIC columns of the matrix", "names no column")
    return TopoMatrix(gpus=tuple(gpus), nics=tuple(nics), labels=labels, cells=tuple(rows))


def _legends(rest: list[tuple[int, str]]) -> dict[str, str]:
    """The NIC Legend's entries; the link Legend is read past. Any other line is refused."""
    nic_legend: dict[str, str] = {}
    block = ""
    for lineno, line in rest:
        text = line.strip()
        if not text:
            continue
        if text in ("Legend:", "NIC Legend:"):
            block = text
            continue
        if block == "Legend:" and _LEGEND_ENTRY.match(line):
            continue
        m = _NIC_ENTRY.match(line)
        if block == "NIC Legend:" and m:
            if m.group(1) in nic_legend:
                raise _refuse(lineno, line, "one entry per NIC", f"{m.group(1)} named twice")
            nic_legend[m.group(1)] = m.group(2)
            continue
        raise _refuse(lineno, line, "the Legend and NIC Legend blocks after the matrix", "unexpected line")
    return nic_legend


def gpu_rails(matrix: TopoMatrix, within: frozenset[str] = frozenset({"PIX"})) -> RailAffinity:
    """Each GPU's rail HCAs: the NICs whose link from the GPU is in ``within`` (PIX: the same
    PCIe switch). GPUs that reach none, and NICs that several GPUs reach, are reported."""
    claims: dict[str, list[int]] = {}
    rails: list[GpuRail] = []
    for g in matrix.gpus:
        hcas = tuple(n.device for n in matrix.nics if matrix.link(f"GPU{g.index}", n.label) in within)
        rails.append(GpuRail(g.index, hcas))
        for h in hcas:
            claims.setdefault(h, []).append(g.index)
    return RailAffinity(
        rails=tuple(rails),
        gpus_without_rail=tuple(r.gpu for r in rails if not r.hcas),
        shared_nics=tuple(SharedNic(h, tuple(gs)) for h, gs in claims.items() if len(gs) > 1),
    )
