"""``gpufabric inventory import FILE --format nvidia-smi-topo``: the GPU <-> HCA rail affinity of
nodes (issue 33), the InfiniBand kind's own import format (:meth:`InfinibandKind.import_formats`;
the ``gpufabric.import_formats`` entry point names :func:`import_format`).

FILE is ``nvidia-smi topo -m`` of one or more nodes as ``pdsh``/``clush`` print it, ``HOST: LINE``
(``pdsh -w gpu-a[01-18] nvidia-smi topo -m``). Each host's matrix is read
(:func:`~gpufabric.fabrics.infiniband.readers.topo.parse_topo_matrix`) and each GPU's rail HCAs are
the NICs at ``PIX`` from it (:func:`~gpufabric.fabrics.infiniband.readers.topo.gpu_rails`). Every HCA
port of that node whose RDMA device (``device``, the ``mlx5_N`` of its node description
``"HOSTNAME mlx5_N"``, as the ibnetdiscover import stores it) is a GPU's rail gets ``gpu:`` that
GPU's module id, on every instance; the node's other entries are kept.

**GPU index -> module id.** ``topo -m`` prints ``GPU<n>``, nvidia-smi's index (PCI bus order),
not the board's module id (``nvidia-smi -q``'s ``Module Id``), and gives no module id. This import
assumes **module = index + 1** (right on HGX H100/H200 boards, whose module ids follow the PCI
order of their GPUs) and says so on every host it writes; a board where they differ gets its
``gpu:`` values corrected in a YAML/JSON import. Never silently.

Reported, not written: a GPU with no rail HCA (no NIC at PIX), a NIC that two GPUs reach (it is
no one GPU's rail: neither gets it), a rail NIC the node has no HCA port for (e.g. an Ethernet
NIC), a host the store does not know or with no HCA ports (``--strict``: refused instead), and a
leased or moving node whose affinity would change (its tenants' PKeys would move between HCAs:
import it while the node is in quarantine). Bad text refuses the whole file, nothing written."""

from __future__ import annotations

import dataclasses
import re
from typing import Final

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.hooks import ImportEntry, ImportFormat, ImportReport, ImportRequest
from gpufabric.domain.models import Inventory, Node, NodeState
from gpufabric.fabrics.infiniband.entries import IbPort, all_ib_ports, with_ib
from gpufabric.fabrics.infiniband.readers.topo import RailAffinity, gpu_rails, parse_topo_matrix

NAME: Final = "nvidia-smi-topo"
MAPPING: Final = "module = GPU index + 1 (topo -m prints no module id)"
BUSY: Final = (NodeState.LEASED, NodeState.MOVING)
_PDSH: Final = re.compile(r"^(?P<host>[A-Za-z0-9][A-Za-z0-9_.-]*): ?(?P<line>.*)$")


def import_format() -> ImportFormat:
    """The format, as the kind and the entry point give it."""
    return ImportFormat(NAME, read)


def module_of(index: int) -> int:
    """The GPU module id this import gives nvidia-smi's GPU ``index`` (:data:`MAPPING`)."""
    return index + 1


def split_hosts(text: str) -> dict[str, str]:
    """``HOST: LINE`` output: host -> its text, lines in order. A non-blank line without a host
    prefix is a ValidationError naming its number."""
    out: dict[str, list[str]] = {}
    for k, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _PDSH.match(line)
        if m is None:
            raise ValidationError(f"line {k}", line[:80], "pdsh/clush output of nvidia-smi topo -m: 'HOST: LINE'")
        out.setdefault(m.group("host"), []).append(m.group("line"))
    if not out:
        raise ValidationError("file", "", "pdsh/clush output of nvidia-smi topo -m ('HOST: LINE')")
    return {h: "\n".join(lines) + "\n" for h, lines in out.items()}


def rail_modules(rails: RailAffinity) -> dict[str, int]:
    """RDMA device -> the module id of the one GPU whose rail it is (NICs two GPUs reach left out)."""
    shared = {s.hca for s in rails.shared_nics}
    return {h: module_of(r.gpu) for r in rails.rails for h in r.hcas if h not in shared}


def read(req: ImportRequest) -> ImportReport:
    """Each host's rails set as ``gpu`` on its HCA ports (every host's text read first)."""
    rails = {h: _rails(h, t) for h, t in split_hosts(req.text).items()}
    known = {n.name: n for n in req.known()}
    nodes: list[Node] = []
    entries: list[ImportEntry] = []
    lines: list[str] = []
    for host, r in rails.items():
        node = known.get(host)
        ports = all_ib_ports(node) if node is not None else ()
        doc = _doc(host, r)
        skip = _skip(host, node, ports)
        if skip and req.strict:
            raise ValidationError("host", host, "a node of the store with HCA ports (--strict)", skip[1])
        if skip:
            entries.append(ImportEntry(f"host {host}", doc, skip=skip[0], reason=skip[1]))
            continue
        assert node is not None
        gpu_of = rail_modules(r)
        devices = {p.device for p in ports}
        lines += [
            f"{host}: GPU{g} (module {module_of(g)}) has no rail HCA (no NIC at PIX)" for g in r.gpus_without_rail
        ]
        lines += [f"{host}: NIC {s.hca} is reached by GPUs {', '.join(f'GPU{g}' for g in s.gpus)}: no one GPU's rail, "
                  "given to none" for s in r.shared_nics]  # fmt: skip
        lines += [f"{host}: rail NIC {h} of module {m} is no HCA port of the node in the store" for h, m in gpu_of.items()
                  if h not in devices]  # fmt: skip
        new = tuple(dataclasses.replace(p, gpu=gpu_of.get(p.device)) for p in ports)
        changed = [(p, q) for p, q in zip(ports, new, strict=True) if p.gpu != q.gpu]
        if changed and node.state in BUSY:
            reason = (f"node {host} is {node.state.value}: its HCAs' GPU affinity changes only in quarantine "
                      "(its tenants' PKeys would move between HCAs)")  # fmt: skip
            entries.append(ImportEntry(f"host {host}", doc, skip=node.state.value, reason=reason))
            lines.append(f"{host}: skipped: {reason}")
            continue
        if changed:
            lines.append(f"{host}: GPU affinity by {MAPPING}: " + ", ".join(
                f"{q.device}/{q.port_num} gpu {p.gpu or '-'} -> {q.gpu or '-'}" for p, q in changed))  # fmt: skip
            nodes.append(with_ib(node, *new))
        entries.append(ImportEntry(f"host {host}", doc, node=host, ports=sum(1 for q in new if q.gpu is not None)))
    return ImportReport(Inventory(tuple(nodes)), tuple(entries), {}, tuple(lines),
                        {"mapping": MAPPING, "hosts": [e.doc for e in entries]})  # fmt: skip


def _rails(host: str, text: str) -> RailAffinity:
    """``host``'s rails; bad text is a ValidationError naming the host and the line."""
    try:
        return gpu_rails(parse_topo_matrix(text))
    except ValidationError as e:
        raise ValidationError(f"{host}: {e.field}", e.value, e.allowed) from None


def _skip(host: str, node: Node | None, ports: tuple[IbPort, ...]) -> tuple[str, str] | None:
    if node is None:
        return "unknown", f"no node {host} in the store"
    if not ports:
        return "no-hcas", f"node {host} has no HCA ports (import its ibnetdiscover first)"
    return None


def _doc(host: str, r: RailAffinity) -> dict[str, object]:
    return {"host": host, "rails": {str(module_of(x.gpu)): list(x.hcas) for x in r.rails},
            "without_rail": [module_of(g) for g in r.gpus_without_rail],
            "shared_nics": {s.hca: [module_of(g) for g in s.gpus] for s in r.shared_nics}}  # fmt: skip
