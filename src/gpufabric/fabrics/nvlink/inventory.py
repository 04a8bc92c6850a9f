"""``gpufabric inventory import FILE --format nvidia-smi``: the NVLink kind's own import format
(:meth:`NvlinkKind.import_formats`; the ``gpufabric.import_formats`` entry point names
:func:`import_format`, so the command loads this module and not every kind).

FILE is ``nvidia-smi -q`` of many nodes as ``pdsh``/``clush`` print it, ``host: line``
(``pdsh -w gpu-a[01-18] nvidia-smi -q``, or only its ``CliqueId``/``ClusterUUID`` lines, as
NVIDIA topograph collects them; :meth:`backend.FmBackend.domains_text` prints the same through the
driver's per-node ``smi`` commands). Each host names a node of the store with GPUs on the
NVLink instance ``--fabric`` (default: the only one); its GPUs' entries get the NVLink domain
its Fabric section reports (:func:`~gpufabric.fabrics.nvlink.readers.smi.smi_domain`: ClusterUUID
and CliqueId, or none: the node is its own board's), and keep everything else. A host the store
does not know, or a node without GPUs, is skipped and reported; ``--strict`` refuses the whole
text instead. A bad value or a node whose GPUs disagree refuses the whole text (one line naming
the field), nothing written.

What root on a node prints is a claim: a domain read while a tenant holds the node says only
what that tenant's ``nvidia-smi`` said. So a leased node's recorded domain does not change (the
host is skipped and reported, ``leased``; the store changes a node's ports only in quarantine
anyway); a node whose domain is unchanged is not written; each change is reported."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.hooks import ImportEntry, ImportFormat, ImportReport, ImportRequest, import_instance
from gpufabric.domain.models import Inventory, Node, NodeState
from gpufabric.fabrics.nvlink.entries import NvlinkDomain, gpu_ports, node_domain, node_gpus
from gpufabric.fabrics.nvlink.readers.smi import parse_pdsh, smi_domain
from gpufabric.fabrics.nvlink.state import FABRIC

NAME = "nvidia-smi"


def import_format() -> ImportFormat:
    """The format, as the kind and the entry point give it."""
    return ImportFormat(NAME, read)


def read(req: ImportRequest) -> ImportReport:
    """Each host's NVLink domain recorded on its node's GPUs (every host's text read first)."""
    instance = import_instance(req.instance, req.instances, FABRIC, "NVLink")
    domains = {h: smi_domain(h, text) for h, text in parse_pdsh(req.text).items()}
    if not domains:
        raise ValidationError("file", "", "pdsh/clush output of nvidia-smi -q ('HOST: LINE')")
    known = {n.name: n for n in req.known()}
    nodes: list[Node] = []
    entries: list[ImportEntry] = []
    lines: list[str] = []
    for host, d in domains.items():
        node = known.get(host)
        gpus = node_gpus(node, instance) if node is not None else ()
        skip, reason = ("", "")
        if node is None:
            skip, reason = "unknown", f"no node {host} in the store"
        elif not gpus:
            skip, reason = "no-gpus", f"node {host} has no GPUs on NVLink instance {instance}"
        if skip and req.strict:
            raise ValidationError("host", host, "a node of the store with GPUs (--strict)", reason)
        was = node_domain(host, gpus) if gpus else d
        if not skip and was != d and node is not None and node.state is NodeState.LEASED:
            skip, reason = "leased", (f"node {host} is leased: its NVLink domain ({was.id}) is recorded only while it is "
                                      f"in quarantine, not from what its tenant's nvidia-smi says ({d.id})")  # fmt: skip
        doc = {"host": host, **d.to_dict()}
        if skip:
            entries.append(ImportEntry(f"host {host}", doc, skip=skip, reason=reason))
            lines.extend([f"{host}: skipped: {reason}"] if skip == "leased" else [])
            continue
        assert node is not None
        if was != d:
            lines.append(f"{host}: NVLink domain {was.id} -> {d.id}")
            nodes.append(node.with_ports(*gpu_ports(*(_in(g, d) for g in gpus), instance=instance)))
        entries.append(ImportEntry(f"host {host}", doc, node=host, ports=len(gpus)))
    return ImportReport(Inventory(tuple(nodes)), tuple(entries), {}, tuple(lines),
                        {"domains": [e.doc for e in entries]})  # fmt: skip


def _in(gpu: Any, d: NvlinkDomain) -> Any:
    return replace(gpu, cluster_uuid=d.cluster_uuid, clique_id=d.clique_id)
