"""A typed view of one DPU's inventory facts (``Dpu.details``, :mod:`.entries`), validated with clear errors.

Keys (all strings in the inventory's ``dpus:`` entries):

``dpu_node``      the DPU's Kubernetes node name (default ``<host>-<dpu name>``)
``pf``            the host-side PF netdev, e.g. ``ens1f0``
``vfs``           number of VFs on the PF (VF 0 is the management port), default 8
``mgmt_vf``       the management VF netdev (``OVNKUBE_NODE_MGMT_PORT_NETDEV``), default ``<pf>v0``
``representors``  comma-separated tenant-facing VF representors on the DPU's ``br-int``
                  (default ``pf0vf1``; one OVN logical port each while the node is leased)
``nic_model``     e.g. ``BlueField-2`` (offload-table capacity is configured per model)
``ovsdb``         the DPU-side OVSDB remote, e.g. ``tcp:192.0.2.10:6640`` (documentation only;
                  the backend takes remotes from its ``fabrics.yaml`` section)
``gw_interface``  ``external_ids:ovn-gw-interface`` on the DPU's OVS (optional)
``gw_nexthop``    ``external_ids:ovn-gw-nexthop`` (optional, an IPv4/IPv6 address)
``mst_device``    the device ``mlxconfig``/``flint`` read its mode and firmware from, e.g.
                  ``/dev/mst/mt41686_pciconf0`` or a PCI address (default: the ``dpu.mst`` section's)
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from gpufabric.domain.entries import node_entries
from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.models import Node
from gpufabric.domain.values import check_name
from gpufabric.fabrics.dpu.entries import DETAIL_KEYS, KIND, Dpu, DpuMode, parse_dpus
from gpufabric.transport.secrets import TlsFiles

NEEDS = "a node with a DPU in the inventory"  # what a node must have for a DPU command
NETDEV_ALLOWED: Final = "a netdev name: 1-15 chars of A-Z a-z 0-9 _ . -"
_NETDEV_RE: Final = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")
_REMOTE_RE: Final = re.compile(r"^(unix:/\S+|(tcp|ssl):\S+:\d{1,5})$")
REMOTE_ALLOWED: Final = "unix:/path, tcp:HOST:PORT or ssl:HOST:PORT"
MAX_VFS: Final = 1024
_MST_RE: Final = re.compile(r"^(/dev/mst/[A-Za-z0-9_.]{1,64}|([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])$")


def _netdev(field: str, raw: str) -> str:
    if not _NETDEV_RE.match(raw):
        raise ValidationError(field, raw, NETDEV_ALLOWED)
    return raw


def check_remote(field: str, raw: str, error: type[ValidationError] = ValidationError) -> str:
    if not isinstance(raw, str) or not _REMOTE_RE.match(raw):
        raise error(field, raw, REMOTE_ALLOWED)
    return raw


def check_remote_tls(field: str, remote: str, tls: TlsFiles | None) -> TlsFiles | None:
    """A driver's remote and its TLS files: ``ssl:`` needs them, other remotes take none."""
    check_remote(field, remote, ConfigError)
    if remote.startswith("ssl:") and tls is None:
        raise ConfigError("dpu.tls", None, f"private_key, certificate and ca_cert ({field} is {remote})")
    if tls is not None and not remote.startswith("ssl:"):
        raise ConfigError(field, remote, "an ssl: remote (TLS files were given for it)")
    return tls


@dataclass(frozen=True)
class DpuInfo:
    """One host's DPU, as the DPU fabric needs it."""

    host: str
    name: str
    mode: DpuMode
    dpu_node: str
    pf: str = "ens1f0"
    vfs: int = 8
    mgmt_vf: str = "ens1f0v0"
    representors: tuple[str, ...] = ("pf0vf1",)
    nic_model: str = "generic"
    ovsdb: str = ""
    gw_interface: str = ""
    gw_nexthop: str = ""
    mst_device: str = ""

    @classmethod
    def from_dpu(cls, dpu: Dpu) -> DpuInfo:
        return _parse(dpu)

    @classmethod
    def _from_dpu(cls, dpu: Dpu) -> DpuInfo:
        path = f"nodes[{dpu.node}].dpus[{dpu.name}]"
        d = dict(dpu.details)
        for key in d:
            if key not in DETAIL_KEYS:
                raise ValidationError(f"{path}.{key}", d[key], f"known keys only: {', '.join(sorted(DETAIL_KEYS))}")
        dpu_node = check_name(f"{path}.dpu_node", d.get("dpu_node", f"{dpu.node}-{dpu.name}"))
        if dpu_node == dpu.node:
            raise ValidationError(f"{path}.dpu_node", dpu_node, "a Kubernetes node name other than the host's")
        pf = _netdev(f"{path}.pf", d.get("pf", "ens1f0"))
        vfs_raw = d.get("vfs", "8")
        if not vfs_raw.isdigit() or not 2 <= int(vfs_raw) <= MAX_VFS:
            raise ValidationError(f"{path}.vfs", vfs_raw, f"2-{MAX_VFS} (VF 0 is the management port)")
        mgmt = _netdev(f"{path}.mgmt_vf", d.get("mgmt_vf", f"{pf}v0"))
        reps_raw = d.get("representors", "pf0vf1")
        reps = tuple(r.strip() for r in reps_raw.split(",") if r.strip())
        if not reps:
            raise ValidationError(f"{path}.representors", reps_raw, "one or more netdev names, comma-separated")
        for r in reps:
            _netdev(f"{path}.representors", r)
            if r.endswith("vf0") and r.startswith("pf"):
                raise ValidationError(f"{path}.representors", r, "VF representors other than VF 0 (management)")
        if len(set(reps)) != len(reps):
            raise ValidationError(f"{path}.representors", reps_raw, "distinct names")
        nic = d.get("nic_model", "generic").strip()
        if not nic or len(nic) > 63:
            raise ValidationError(f"{path}.nic_model", nic, "1-63 characters, e.g. BlueField-2")
        ovsdb = check_remote(f"{path}.ovsdb", d["ovsdb"]) if d.get("ovsdb") else ""
        gw_if = _netdev(f"{path}.gw_interface", d["gw_interface"]) if d.get("gw_interface") else ""
        gw_nh = d.get("gw_nexthop", "")
        if gw_nh:
            try:
                ipaddress.ip_address(gw_nh)
            except ValueError:
                raise ValidationError(f"{path}.gw_nexthop", gw_nh, "an IPv4 or IPv6 address") from None
        mst = d.get("mst_device", "")
        if mst and not _MST_RE.match(mst):
            raise ValidationError(f"{path}.mst_device", mst, "/dev/mst/<name> or a PCI address like 0000:03:00.0")
        return cls(dpu.node, dpu.name, dpu.mode, dpu_node, pf, int(vfs_raw), mgmt, reps, nic, ovsdb, gw_if, gw_nh, mst)


@lru_cache(maxsize=1 << 16)
def _parse(dpu: Dpu) -> DpuInfo:
    """Parsed once per distinct inventory entry (desired, audit and ownership all ask)."""
    return DpuInfo._from_dpu(dpu)


def node_dpus(node: Node, instance: str = KIND) -> tuple[Dpu, ...]:
    """``node``'s DPU entries on DPU instance ``instance`` (those of its ``dpus:`` key when it
    has none of its own there: :func:`~gpufabric.domain.fabric.node_entries`)."""
    return node_entries(node, instance, parse_dpus, KIND)


def node_dpu(node: Node, instance: str = KIND) -> DpuInfo | None:
    """The DPU of ``node`` (None: it has none). One DPU per node is supported."""
    dpus = node_dpus(node, instance)
    if not dpus:
        return None
    if len(dpus) > 1:
        raise ValidationError(f"nodes[{node.name}].dpus", [d.name for d in dpus], "at most one DPU per node")
    return DpuInfo.from_dpu(dpus[0])


def dpu_inventory(nodes: tuple[Node, ...], instance: str = KIND) -> dict[str, DpuInfo]:
    """host node -> its DPU, for every node that has one; DPU node names must be unique."""
    out: dict[str, DpuInfo] = {}
    seen: dict[str, str] = {}
    for n in nodes:
        info = node_dpu(n, instance)
        if info is None:
            continue
        if info.dpu_node in seen:
            raise ValidationError(
                f"nodes[{n.name}].dpus[{info.name}].dpu_node", info.dpu_node, f"unique (also on {seen[info.dpu_node]})"
            )
        seen[info.dpu_node] = n.name
        out[n.name] = info
    return out
